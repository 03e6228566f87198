//! Which members a pack writes ([`super::pack_selected`]): all of them, or a named
//! selection whose walk goes only where the selected members lead; and who hears of each
//! member written (its `stat` record, for the SSH lane's delta manifest).

use std::collections::HashSet;

use crate::tar::members::MemberRecord;
use crate::tar::walk::WalkEntry;

/// `only` and every ancestor of its members: where a walk of the selection needs to go.
pub(super) fn within_of(only: &HashSet<String>) -> HashSet<String> {
    let mut within = only.clone();
    for member in only {
        let mut at = member.as_str();
        while let Some(slash) = at.rfind('/') {
            at = &at[..slash];
            if !within.insert(at.to_string()) {
                break;
            }
        }
    }
    within
}

/// The members a pack writes, and who hears of each.
pub(super) struct Selection<'a> {
    only: Option<&'a HashSet<String>>,
    /// `only` and every ancestor of its members: where the walk needs to go.
    pub(super) within: Option<HashSet<String>>,
    record: Option<&'a mut (dyn FnMut(MemberRecord) + Send)>,
}

impl<'a> Selection<'a> {
    /// Every member, recorded nowhere.
    pub(super) const ALL: Selection<'static> = Selection { only: None, within: None, record: None };

    pub(super) fn new(
        only: Option<&'a HashSet<String>>,
        record: &'a mut (dyn FnMut(MemberRecord) + Send),
    ) -> Selection<'a> {
        Selection { only, within: only.map(within_of), record: Some(record) }
    }

    /// Whether `entry` is written (telling the recorder when it is).
    pub(super) fn take(&mut self, entry: &WalkEntry<'_>) -> bool {
        if self.only.is_some_and(|only| !only.contains(entry.member)) {
            return false;
        }
        if let Some(record) = self.record.as_mut() {
            record(MemberRecord::of(entry));
        }
        true
    }
}
