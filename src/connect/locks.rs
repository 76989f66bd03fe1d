//! In-process single flight, keyed by connection id: while one request of
//! this instance refreshes a connection's token, the others wait here —
//! without holding a database connection — and then re-read. Across
//! instances the row lock in the vault does the same job.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, Weak},
};

use uuid::Uuid;

#[derive(Default)]
pub struct KeyedLocks {
    locks: Mutex<HashMap<Uuid, Weak<tokio::sync::Mutex<()>>>>,
}

impl KeyedLocks {
    /// The lock for `key`, shared by everyone asking for it at the same time.
    pub fn get(&self, key: Uuid) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(lock) = locks.get(&key).and_then(Weak::upgrade) {
            return lock;
        }
        // Forget locks nobody holds any more, so the map stays small.
        locks.retain(|_, weak| weak.strong_count() > 0);
        let lock = Arc::new(tokio::sync::Mutex::new(()));
        locks.insert(key, Arc::downgrade(&lock));
        lock
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_key_same_lock_and_unused_ones_are_dropped() {
        let locks = KeyedLocks::default();
        let k = Uuid::new_v4();
        let a = locks.get(k);
        let b = locks.get(k);
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &locks.get(Uuid::new_v4())));
        drop((a, b));
        let _c = locks.get(Uuid::new_v4());
        assert_eq!(locks.locks.lock().unwrap().len(), 1);
    }
}
