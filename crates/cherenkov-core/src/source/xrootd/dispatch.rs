//! Which connection takes a request, and when: a queue in front of the connections.
//!
//! One XRootD connection answers its requests one after another, so a request sent to a busy
//! connection waits for everything queued before it there. Sending every piece of a large read at
//! once pins it to the connections in use at that moment: connections that log in later (the count
//! grew) get nothing of it. So, with adaptive streams, a connection takes a request only while the
//! bytes it still has to deliver stay under a window (about two of its bandwidth-delay products:
//! enough to keep it busy); the rest wait here, in order, and go to the first connection with room
//! — new connections included. A connection with nothing in flight always takes the next request,
//! whatever its size. Without a window (fixed streams) every request goes out at once, to the
//! connection with the fewest bytes in flight.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::oneshot;

/// A request's place on a connection: counted in that connection's load until dropped (even if
/// the request never ran, or was handed over and never received).
pub(super) struct Assigned {
    dispatch: Arc<Dispatch>,
    pub(super) slot: usize,
    bytes: u64,
}

impl Drop for Assigned {
    fn drop(&mut self) {
        self.dispatch.release(self.slot, self.bytes);
    }
}

/// A request's place in line.
pub(super) enum Ticket {
    Now(Assigned),
    Later(oneshot::Receiver<Assigned>),
}

impl Ticket {
    /// The connection, once one has room; None if the queue was dropped (the source is gone).
    pub(super) async fn connection(self) -> Option<Assigned> {
        match self {
            Ticket::Now(assigned) => Some(assigned),
            Ticket::Later(rx) => rx.await.ok(),
        }
    }
}

/// The queue and each connection's load.
pub(super) struct Dispatch {
    state: Mutex<State>,
}

struct State {
    /// Bytes still to be delivered by each connection's requests, by slot.
    loads: Vec<u64>,
    /// Requests in flight, by slot.
    requests: Vec<usize>,
    /// Slots that may take requests now (ready, within the stream count), in order.
    usable: Vec<usize>,
    /// Most bytes in flight per connection; None: no limit.
    window: Option<u64>,
    /// Requests waiting for room, in the order they came.
    waiting: VecDeque<(u64, oneshot::Sender<Assigned>)>,
}

impl Dispatch {
    pub(super) fn new(slots: usize, usable: Vec<usize>) -> Arc<Dispatch> {
        Arc::new(Dispatch {
            state: Mutex::new(State {
                loads: vec![0; slots],
                requests: vec![0; slots],
                usable,
                window: None,
                waiting: VecDeque::new(),
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place in line for a request of `bytes` (taken now, so requests are served in the order
    /// they asked); [`Ticket::connection`] waits for a connection with room.
    pub(super) fn assign(self: &Arc<Self>, bytes: u64) -> Ticket {
        let mut state = self.lock();
        if state.waiting.is_empty() {
            if let Some(slot) = state.room_for(bytes) {
                state.add(slot, bytes);
                return Ticket::Now(self.assigned(slot, bytes));
            }
        }
        let (tx, rx) = oneshot::channel();
        state.waiting.push_back((bytes, tx));
        Ticket::Later(rx)
    }

    /// Requests waiting for a connection with room.
    pub(super) fn waiting(&self) -> usize {
        self.lock().waiting.len()
    }

    /// Requests in flight on `slot`.
    #[cfg(test)]
    pub(super) fn requests(&self, slot: usize) -> usize {
        self.lock().requests[slot]
    }

    /// The slots that may take requests, and the window per connection: waiting requests move
    /// when there is more room.
    pub(super) fn set_usable(self: &Arc<Self>, usable: Vec<usize>, window: Option<u64>) {
        let undelivered = {
            let mut state = self.lock();
            state.usable = usable;
            state.window = window;
            self.pump(&mut state)
        };
        drop(undelivered);
    }

    fn assigned(self: &Arc<Self>, slot: usize, bytes: u64) -> Assigned {
        Assigned {
            dispatch: self.clone(),
            slot,
            bytes,
        }
    }

    fn release(self: &Arc<Self>, slot: usize, bytes: u64) {
        let undelivered = {
            let mut state = self.lock();
            state.loads[slot] = state.loads[slot].saturating_sub(bytes);
            state.requests[slot] = state.requests[slot].saturating_sub(1);
            self.pump(&mut state)
        };
        // Dropped outside the lock: each gives its room back (and may move the queue again).
        drop(undelivered);
    }

    /// Hand waiting requests to connections with room, in order. Returns the assignments whose
    /// request was no longer waiting (cancelled), to drop once the lock is released.
    fn pump(self: &Arc<Self>, state: &mut State) -> Vec<Assigned> {
        let mut undelivered = Vec::new();
        while let Some(&(bytes, _)) = state.waiting.front() {
            let Some(slot) = state.room_for(bytes) else {
                break;
            };
            let Some((_, tx)) = state.waiting.pop_front() else {
                break;
            };
            state.add(slot, bytes);
            if let Err(assigned) = tx.send(self.assigned(slot, bytes)) {
                // Its read was dropped: undo after the lock (dropping here would lock again).
                undelivered.push(assigned);
            }
        }
        undelivered
    }
}

impl State {
    /// The usable connection with the fewest bytes in flight, if it has room for `bytes` more.
    fn room_for(&self, bytes: u64) -> Option<usize> {
        let slot = *self.usable.iter().min_by_key(|&&i| self.loads[i])?;
        let load = self.loads[slot];
        let fits = match self.window {
            None => true,
            Some(window) => load == 0 || load.saturating_add(bytes) <= window,
        };
        fits.then_some(slot)
    }

    fn add(&mut self, slot: usize, bytes: u64) {
        self.loads[slot] += bytes;
        self.requests[slot] += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn requests_wait_for_room_and_go_to_new_connections() {
        let dispatch = Dispatch::new(4, vec![0, 1]);
        dispatch.set_usable(vec![0, 1], Some(2 << 20));
        let a = dispatch.assign(1 << 20).connection().await.unwrap();
        let b = dispatch.assign(1 << 20).connection().await.unwrap();
        let c = dispatch.assign(1 << 20).connection().await.unwrap();
        let d = dispatch.assign(1 << 20).connection().await.unwrap();
        assert_eq!(
            (a.slot, b.slot, c.slot, d.slot),
            (0, 1, 0, 1),
            "the least loaded first"
        );
        // Both windows are full: the next waits ...
        let d2 = dispatch.clone();
        let mut e = tokio::spawn(async move { d2.assign(1 << 20).connection().await.unwrap() });
        tokio::task::yield_now().await;
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(20), &mut e)
                .await
                .is_err()
        );
        // ... and goes to a connection that became usable.
        dispatch.set_usable(vec![0, 1, 2], Some(2 << 20));
        let e = e.await.unwrap();
        assert_eq!(e.slot, 2);
        assert_eq!(dispatch.requests(2), 1);
        drop(e);
        assert_eq!(dispatch.requests(2), 0);
        // An idle connection takes a request larger than the window.
        drop((a, c));
        assert_eq!(dispatch.assign(8 << 20).connection().await.unwrap().slot, 0);
        // Without a window everything goes at once.
        dispatch.set_usable(vec![0, 1], None);
        let all: Vec<_> =
            futures_util::future::join_all((0..10).map(|_| dispatch.assign(4 << 20).connection()))
                .await;
        assert_eq!(all.len(), 10);
        drop((b, d));
    }

    #[tokio::test]
    async fn a_cancelled_wait_gives_its_room_back() {
        let dispatch = Dispatch::new(1, vec![0]);
        dispatch.set_usable(vec![0], Some(1 << 20));
        let a = dispatch.assign(1 << 20).connection().await.unwrap();
        let d2 = dispatch.clone();
        let waiting = tokio::spawn(async move { d2.assign(1 << 20).connection().await.unwrap() });
        tokio::task::yield_now().await;
        waiting.abort();
        let _ = waiting.await;
        drop(a);
        assert_eq!(dispatch.requests(0), 0, "nothing left counted on the slot");
        assert_eq!(dispatch.assign(1 << 20).connection().await.unwrap().slot, 0);
    }
}
