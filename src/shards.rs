//! Values written on every request, kept once per thread and read
//! together. A cache line written by two cores moves between them on each
//! write: with every worker adding to the same counters, each request
//! waits for lines the other worker wrote last (measured: bench/NOTES.md,
//! "Lines two workers write"). Here each thread writes its own shard, on
//! lines of its own, and a reader (a scrape) goes over all of them.
//!
//! A thread takes the next shard when it first writes anywhere, round
//! robin: actix's workers, which write nearly all of it, start first and
//! get shards of their own. Threads beyond [`SHARDS`] share one, which is
//! still correct, only slower.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Shards per value: more than the worker threads of any machine this is
/// likely to run on (actix starts one per core).
pub const SHARDS: usize = 16;

/// Keeps each shard on cache lines of its own (128 bytes: Intel's
/// prefetcher fetches lines in pairs).
#[repr(align(128))]
#[derive(Default)]
struct Padded<T>(T);

/// `T` once per shard.
pub struct Sharded<T> {
    shards: Box<[Padded<T>]>,
}

impl<T: Default> Default for Sharded<T> {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Padded(T::default())).collect(),
        }
    }
}

impl<T> Sharded<T> {
    /// This thread's shard.
    pub fn local(&self) -> &T {
        &self.shards[this_threads_shard()].0
    }

    /// Every shard, for reading them together.
    pub fn all(&self) -> impl Iterator<Item = &T> + Clone {
        self.shards.iter().map(|s| &s.0)
    }

    /// What `read` finds in every shard, added up.
    pub fn sum(&self, read: impl Fn(&T) -> u64) -> u64 {
        self.all().map(read).sum()
    }
}

/// The shard of the calling thread, the same for all its life.
fn this_threads_shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    SHARD.with(|shard| *shard)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn threads_write_their_own_shards_and_a_reader_sees_them_all() {
        let counts: Sharded<AtomicU64> = Sharded::default();
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..1000 {
                        counts.local().fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        });
        let written: Vec<u64> = counts
            .all()
            .map(|c| c.load(Ordering::Relaxed))
            .filter(|n| *n > 0)
            .collect();
        assert_eq!(written.iter().sum::<u64>(), 4000);
        assert!(
            written.len() > 1,
            "four threads wrote into one shard: {written:?}"
        );
    }

    #[test]
    fn a_thread_keeps_its_shard() {
        let counts: Sharded<AtomicU64> = Sharded::default();
        let first: *const AtomicU64 = counts.local();
        let again: *const AtomicU64 = counts.local();
        assert_eq!(first, again);
    }

    #[test]
    fn shards_do_not_share_cache_lines() {
        let counts: Sharded<AtomicU64> = Sharded::default();
        let addresses: Vec<usize> = counts.all().map(|c| c as *const _ as usize).collect();
        for pair in addresses.windows(2) {
            assert!(pair[1] - pair[0] >= 128, "{addresses:?}");
        }
    }
}
