//! What flows from the store to a watcher.

use std::sync::Arc;

use super::object::Stored;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// What a watcher receives, already projected through its filter.
#[derive(Debug, Clone)]
pub enum WatchItem {
    Event(EventType, Arc<Stored>),
    /// All events up to this revision have been delivered.
    Bookmark(u64),
}
