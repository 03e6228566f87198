//! Native objects the JS layer holds by id for the length of a call (a cancellation flag, an
//! SSH connect budget): created and released by the JS layer, looked up by the native calls
//! that carry the id.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// The objects of one kind, by id.
pub struct Handles<T> {
    objects: Mutex<BTreeMap<u32, Arc<T>>>,
    next_id: AtomicU32,
}

impl<T> Handles<T> {
    /// An empty table (usable in a `static`).
    pub const fn new() -> Self {
        Handles { objects: Mutex::new(BTreeMap::new()), next_id: AtomicU32::new(1) }
    }

    /// Keeps `object` and returns its id.
    pub fn insert(&self, object: Arc<T>) -> u32 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut map) = self.objects.lock() {
            map.insert(id, object);
        }
        id
    }

    /// The object of `id`, if it is still held.
    pub fn get(&self, id: u32) -> Option<Arc<T>> {
        self.objects.lock().ok().and_then(|map| map.get(&id).cloned())
    }

    /// Forgets `id` (the native work that took the object keeps its own reference).
    pub fn remove(&self, id: u32) {
        if let Ok(mut map) = self.objects.lock() {
            map.remove(&id);
        }
    }
}
