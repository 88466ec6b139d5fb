//! Output buffers kept for the next read. A read's arrays are tens of MB that the kernel must
//! fault in and zero when they are freshly allocated, and that the allocator hands back to it
//! when they are freed (glibc does for blocks over 128 KB): with the page cache warm, a tenth of
//! a read's CPU. A large output buffer here goes back to a process-wide pool when its last
//! holder drops it (an array in Rust, or the numpy array viewing it: see `SharedBytes`), and
//! the next read of the same branches takes buffers of the same sizes from there.

use crate::format::array::{AlignedBytes, SharedBytes, Unwritten};
use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::sync::{Arc, Mutex};

/// Bytes the pool keeps at most; what would exceed it is freed as usual.
const KEPT_BYTES: usize = 256 << 20;

/// Buffers smaller than this are allocated and freed as usual (the allocator reuses small
/// blocks itself).
const KEPT_MIN_BYTES: usize = 32 << 10;

/// Free buffers by capacity in words, and their bytes in all.
struct Pool {
    free: BTreeMap<usize, Vec<Vec<u64>>>,
    bytes: usize,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    free: BTreeMap::new(),
    bytes: 0,
});

fn pool() -> std::sync::MutexGuard<'static, Pool> {
    POOL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A kept buffer of at least `words` words and at most twice that (a larger one would keep
/// memory the read does not use), if the pool has one.
fn take(words: usize) -> Option<Vec<u64>> {
    let mut pool = pool();
    let (&capacity, buffers) = pool
        .free
        .range_mut(words..=words.saturating_mul(2))
        .next()?;
    let buffer = buffers.pop().expect("no empty lists are kept");
    if buffers.is_empty() {
        pool.free.remove(&capacity);
    }
    pool.bytes -= capacity * 8;
    Some(buffer)
}

fn give_back(buffer: Vec<u64>) {
    let bytes = buffer.capacity() * 8;
    let mut pool = pool();
    if pool.bytes + bytes <= KEPT_BYTES {
        pool.bytes += bytes;
        pool.free.entry(buffer.capacity()).or_default().push(buffer);
    }
}

/// `n` offsets to be written, in a kept buffer when large (they come back through
/// `give_back_offsets`).
pub fn offsets(n: usize) -> Unwritten<i64> {
    let mut buffer = std::mem::ManuallyDrop::new(offsets_buffer(n));
    // SAFETY: same allocation and capacity, no element; `MaybeUninit<i64>` has `i64`'s layout.
    let buffer = unsafe { Vec::from_raw_parts(buffer.as_mut_ptr().cast(), 0, buffer.capacity()) };
    Unwritten::in_buffer(buffer, n)
}

/// An empty buffer for at least `n` offsets, kept when large (as `offsets`).
pub fn offsets_buffer(n: usize) -> Vec<i64> {
    let kept = if n * 8 >= KEPT_MIN_BYTES {
        take(n)
    } else {
        None
    };
    match kept {
        Some(kept) => {
            let mut kept = std::mem::ManuallyDrop::new(kept);
            // SAFETY: same allocation and capacity, no element; `i64` has `u64`'s layout.
            unsafe { Vec::from_raw_parts(kept.as_mut_ptr().cast(), 0, kept.capacity()) }
        }
        None => Vec::with_capacity(n),
    }
}

/// Offsets no array holds any more, kept for the next read's when large.
pub fn give_back_offsets(offsets: Vec<i64>) {
    if offsets.capacity() * 8 >= KEPT_MIN_BYTES {
        let mut offsets = std::mem::ManuallyDrop::new(offsets);
        // SAFETY: same allocation, length and capacity; `u64` has `i64`'s layout.
        give_back(unsafe {
            Vec::from_raw_parts(
                offsets.as_mut_ptr().cast(),
                offsets.len(),
                offsets.capacity(),
            )
        });
    }
}

/// An output buffer of `len` bytes, every one to be written before it is read (as
/// `format::array::UnwrittenBytes`), from the pool when large.
pub struct OutputBytes {
    words: Vec<MaybeUninit<u64>>,
    len: usize,
}

impl OutputBytes {
    pub fn new(len: usize) -> Self {
        let n = len.div_ceil(8);
        let kept = if len >= KEPT_MIN_BYTES { take(n) } else { None };
        let mut words: Vec<MaybeUninit<u64>> = match kept {
            Some(kept) => {
                let mut kept = std::mem::ManuallyDrop::new(kept);
                // SAFETY: same allocation and capacity; `MaybeUninit<u64>` has `u64`'s layout.
                unsafe { Vec::from_raw_parts(kept.as_mut_ptr().cast(), 0, kept.capacity()) }
            }
            None => Vec::with_capacity(n),
        };
        // SAFETY: `MaybeUninit` elements need no initialization.
        unsafe { words.set_len(n) };
        // The padding after the last byte belongs to no writer.
        if let Some(last) = words.last_mut() {
            last.write(0);
        }
        Self { words, len }
    }

    pub fn bytes(&mut self) -> &mut [MaybeUninit<u8>] {
        // SAFETY: the words' storage viewed as bytes (alignment 1, `len` within the storage).
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr().cast(), self.len) }
    }

    /// The written bytes: held by a `Kept` (back to the pool when dropped) when large.
    ///
    /// # Safety
    /// Every byte of `bytes()` was written.
    pub unsafe fn assume_written(self) -> AlignedBytes {
        let mut words = std::mem::ManuallyDrop::new(self.words);
        // SAFETY: every word was written (the bytes by the caller's promise, the padding by
        // `new`); same allocation, length and capacity.
        let words = unsafe {
            Vec::from_raw_parts(words.as_mut_ptr().cast(), words.len(), words.capacity())
        };
        if self.len < KEPT_MIN_BYTES {
            return AlignedBytes::from_words(words, self.len);
        }
        AlignedBytes::shared(Arc::new(Kept {
            words,
            len: self.len,
        }))
    }
}

/// Bytes of a read's output that go back to the pool when their last holder drops them.
pub struct Kept {
    words: Vec<u64>,
    len: usize,
}

impl SharedBytes for Kept {
    fn bytes(&self) -> &[u8] {
        // SAFETY: the words viewed as bytes; `len` within them.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast(), self.len) }
    }

    fn words(&self) -> Option<&[u64]> {
        Some(&self.words)
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        give_back(std::mem::take(&mut self.words));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(len: usize, value: u8) -> AlignedBytes {
        let mut out = OutputBytes::new(len);
        for b in out.bytes() {
            b.write(value);
        }
        // SAFETY: every byte written just above.
        unsafe { out.assume_written() }
    }

    #[test]
    fn buffers_dropped_serve_the_next_outputs_and_held_ones_are_never_reused() {
        let len = KEPT_MIN_BYTES * 3 + 5;
        let held = written(len, 1);
        let dropped = written(len, 2);
        drop(dropped);
        // The dropped buffer comes back (the pool may hold others of this size, from other
        // tests: any of them), the held one does not, and what is written is what is read.
        let again = written(len, 3);
        assert_ne!(again.as_bytes().as_ptr(), held.as_bytes().as_ptr());
        assert!(again.as_bytes().iter().all(|&b| b == 3));
        assert!(held.as_bytes().iter().all(|&b| b == 1));
        assert_eq!((held.len, again.len), (len, len));
        // Small outputs are plain words, not kept.
        let small = written(100, 4);
        assert_eq!(small.as_bytes(), &[4u8; 100][..]);
        assert!(small.into_sole_owner().is_err());
        // A kept output held by one array is its owner's alone; by two, by neither.
        let shared = written(len, 5);
        let twice = shared.clone();
        assert!(shared.into_sole_owner().is_err());
        assert!(twice.into_sole_owner().is_ok());
    }

    #[test]
    fn offsets_given_back_serve_later_offsets_written_whole() {
        let n = KEPT_MIN_BYTES / 8 + 3;
        let mut first = offsets(n);
        for (i, slot) in first.slots().iter_mut().enumerate() {
            slot.write(i as i64);
        }
        // SAFETY: every slot written just above.
        let first = unsafe { first.assume_written() };
        assert_eq!(first[n - 1], n as i64 - 1);
        give_back_offsets(first);
        let mut again = offsets(n);
        assert_eq!(again.slots().len(), n);
        for slot in again.slots() {
            slot.write(-1);
        }
        // SAFETY: as above.
        assert!(unsafe { again.assume_written() }.iter().all(|&v| v == -1));
    }

    #[test]
    fn the_pool_keeps_at_most_its_bound_and_only_sizes_that_fit() {
        assert!(take(usize::MAX / 4).is_none());
        let big = KEPT_BYTES / 8; // words: one buffer of the pool's whole bound
        give_back(vec![0u64; big + 1]);
        assert!(pool().bytes <= KEPT_BYTES);
    }
}
