//! The one retry schedule of every byte source: how long to wait before each new attempt of a
//! request that failed in a way that may pass (a refused or reset connection, a timeout, a
//! server error).

use std::time::Duration;

/// The wait before retry `n` (1 for the first): 100 ms, 200 ms, 400 ms, ..., at most 2 s.
pub fn wait_before(n: u32) -> Duration {
    Duration::from_millis(
        100u64
            .saturating_mul(1 << n.saturating_sub(1).min(5))
            .min(2000),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_a_ceiling() {
        assert_eq!(wait_before(1), Duration::from_millis(100));
        assert_eq!(wait_before(3), Duration::from_millis(400));
        assert_eq!(wait_before(30), Duration::from_millis(2000));
    }
}
