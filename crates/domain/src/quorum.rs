//! etcd quorum arithmetic. A cluster of n voting members needs a majority, ⌊n/2⌋+1, to make progress, and
//! tolerates n − quorum failures. Two members tolerate none, which is why two replicas are worse than one: twice
//! the machines that can fail, and no more failures survived.

/// Members needed for a majority.
pub fn quorum(members: u64) -> u64 {
    members / 2 + 1
}

/// Members that may fail while the rest keep a majority.
pub fn fault_tolerance(members: u64) -> u64 {
    members.saturating_sub(quorum(members))
}

/// Whether removing one healthy member keeps a majority of the remaining members healthy.
/// `healthy` counts the healthy members before the removal, including the one removed.
pub fn can_remove_healthy_member(members: u64, healthy: u64) -> bool {
    if members <= 1 {
        return false;
    }
    healthy.saturating_sub(1) >= quorum(members - 1)
}

/// Whether a member may be added. Only when every existing member is healthy: a promoted learner grows the
/// majority, so adding next to a dead member leaves less room for failure than before (4 members, 1 dead:
/// tolerance 0). etcd's documented order for replacing a failed member is remove first, then add.
pub fn can_add_member(members: u64, healthy: u64) -> bool {
    members == 0 || healthy >= members
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        // (members, quorum, tolerance)
        for (n, q, t) in [
            (1, 1, 0),
            (2, 2, 0),
            (3, 2, 1),
            (4, 3, 1),
            (5, 3, 2),
            (7, 4, 3),
        ] {
            assert_eq!(quorum(n), q, "quorum({n})");
            assert_eq!(fault_tolerance(n), t, "fault_tolerance({n})");
        }
    }

    #[test]
    fn removal_needs_a_remaining_majority() {
        assert!(can_remove_healthy_member(3, 3)); // 3 → 2, both healthy
        assert!(!can_remove_healthy_member(3, 2)); // one down: 2 left, one healthy, quorum(2)=2
        assert!(can_remove_healthy_member(5, 4)); // 4 → 3 healthy of 4, quorum(4)=3
        assert!(!can_remove_healthy_member(5, 3));
        assert!(can_remove_healthy_member(2, 2));
        assert!(!can_remove_healthy_member(1, 1)); // the last member is never removed this way
    }

    #[test]
    fn adding_needs_quorum_of_the_grown_cluster() {
        assert!(can_add_member(0, 0));
        assert!(can_add_member(1, 1)); // 1 → 2: the learner is promoted only once caught up
        assert!(can_add_member(3, 3));
        assert!(!can_add_member(3, 2)); // one down: remove it first
        assert!(!can_add_member(2, 1));
    }
}
