//! Joining as a learner, promotion, leadership hand-off and removal, against real etcd.

use std::time::Duration;

use super::Cluster;
use crate::{EtcdError, EtcdTarget, initial_cluster};

const JOIN: Duration = Duration::from_secs(30);

/// Adds member `n` named `name` the way a replica joins: learner, boot with the returned list, promote.
async fn join(c: &mut Cluster, endpoints: &[EtcdTarget], n: u8, name: &str) -> u64 {
    let peer = c.peer_url(n);
    let (learner, list) = c.etcd.add_learner(endpoints, &peer).await.unwrap();
    assert!(learner.is_learner && !learner.started(), "{learner:?}");
    assert!(
        list.iter().any(|m| m.id == learner.id),
        "the list includes the newcomer"
    );

    // A retried apply finds the same learner instead of adding another.
    let (again, _) = c.etcd.add_learner(endpoints, &peer).await.unwrap();
    assert_eq!(again.id, learner.id);

    let cluster = initial_cluster(&list, name, &peer).expect("every other member has started");
    assert!(cluster.contains(&format!("{name}={peer}")), "{cluster}");
    c.start(n, name, Some(&cluster));

    let mut all = endpoints.to_vec();
    all.push(c.target(n, name));
    let promoted = c
        .etcd
        .promote_when_caught_up(&all, learner.id, JOIN)
        .await
        .unwrap();
    assert!(!promoted.is_learner);
    // Promoting again is a no-op.
    c.etcd.promote(&all, learner.id, JOIN).await.unwrap();
    learner.id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grow_to_three_then_remove_the_leader() {
    let mut c = Cluster::new();
    let a = c.target(1, "prod-a");
    c.start(1, "prod-a", None);
    c.wait_ready(&a).await;

    let b_id = join(&mut c, std::slice::from_ref(&a), 2, "prod-b").await;
    let b = c.target(2, "prod-b");
    let two = c.etcd.member_list(&[a.clone(), b.clone()]).await.unwrap();
    assert_eq!(two.len(), 2);
    assert!(two.iter().all(|m| !m.is_learner && m.started()), "{two:?}");

    let c_id = join(&mut c, &[a.clone(), b.clone()], 3, "prod-c").await;
    let cc = c.target(3, "prod-c");
    let all = [a.clone(), b.clone(), cc.clone()];
    let three = c.etcd.member_list(&all).await.unwrap();
    assert_eq!(
        three.iter().filter(|m| !m.is_learner).count(),
        3,
        "{three:?}"
    );
    c.etcd
        .preflight(&["prod-a".into(), "prod-b".into(), "prod-c".into()], &all)
        .await
        .unwrap();

    // Hand leadership to the newest member explicitly, then remove it while it leads.
    c.etcd.move_leader(&all, c_id).await.unwrap();
    assert_eq!(c.etcd.status(&a).await.unwrap().leader_id, c_id);
    c.etcd.remove_member(&all, c_id).await.unwrap();

    // A member applies the removal, and the two left elect a leader, a moment after the removal is committed:
    // until then `a` may still list three members, or name no leader or the removed one.
    let settle = tokio::time::Instant::now() + Duration::from_secs(20);
    let (left, leader) = loop {
        let left = c.etcd.member_list(&[a.clone(), b.clone()]).await.unwrap();
        let leader = c.etcd.status(&a).await.unwrap().leader_id;
        if (left.len() == 2 && leader != 0 && leader != c_id)
            || tokio::time::Instant::now() > settle
        {
            break (left, leader);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(left.iter().all(|m| m.id != c_id));
    assert!(leader != 0 && leader != c_id, "leader {leader:x}");
    // The two remaining members still serve writes, through either of them.
    c.put(&a, "after-remove", "1").await.unwrap();
    c.put(&b, "after-remove", "2").await.unwrap();
    // Removing it again is Ok: the member is already gone.
    c.etcd
        .remove_member(&[a.clone(), b.clone()], c_id)
        .await
        .unwrap();
    assert!(b_id != c_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_the_leader_hands_leadership_over_first() {
    let mut c = Cluster::new();
    let a = c.target(1, "prod-a");
    c.start(1, "prod-a", None);
    c.wait_ready(&a).await;
    join(&mut c, std::slice::from_ref(&a), 2, "prod-b").await;
    let b = c.target(2, "prod-b");
    join(&mut c, &[a.clone(), b], 3, "prod-c").await;
    let all = [a.clone(), c.target(2, "prod-b"), c.target(3, "prod-c")];

    let leader = c.etcd.status(&a).await.unwrap().leader_id;
    c.etcd.remove_member(&all, leader).await.unwrap();

    // The removed leader may still answer the first list with its own, older one until it learns it was removed
    // and stops: the list is the one the remaining members agree on once it settles.
    let settle = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let rest: Vec<EtcdTarget> = loop {
        let list = c.etcd.member_list(&all).await.unwrap();
        let rest: Vec<EtcdTarget> = all
            .iter()
            .filter(|t| list.iter().any(|m| m.name == t.server_name))
            .cloned()
            .collect();
        if rest.len() == 2 || std::time::Instant::now() > settle {
            break rest;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(rest.len(), 2);
    let after = c.etcd.status(&rest[0]).await.unwrap();
    assert!(after.leader_id != 0 && after.leader_id != leader);
    for (i, t) in rest.iter().enumerate() {
        c.put(t, "k", &i.to_string()).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_that_never_starts_times_out_and_can_be_removed() {
    let mut c = Cluster::new();
    let a = c.target(1, "prod-a");
    c.start(1, "prod-a", None);
    c.wait_ready(&a).await;

    let (learner, _) = c
        .etcd
        .add_learner(std::slice::from_ref(&a), &c.peer_url(2))
        .await
        .unwrap();
    // The learner's VM never boots: nothing answers on its endpoint.
    let endpoints = [a.clone(), c.target(2, "prod-q")];
    let err = c
        .etcd
        .await_learner_caught_up(&endpoints, learner.id, Duration::from_secs(2))
        .await
        .unwrap_err();
    assert!(
        matches!(err, EtcdError::AwaitLearner { id, .. } if id == learner.id),
        "{err}"
    );
    assert!(err.to_string().contains("has not answered"), "{err}");

    // Promotion of a learner that never caught up is refused by etcd until the deadline.
    let err = c
        .etcd
        .promote(&endpoints, learner.id, Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(matches!(err, EtcdError::PromoteTimedOut { .. }), "{err}");

    // The single voter keeps serving: a learner does not count towards quorum.
    c.put(&a, "k", "v").await.unwrap();

    c.etcd.remove_member(&endpoints, learner.id).await.unwrap();
    let list = c.etcd.member_list(&endpoints).await.unwrap();
    assert_eq!(list.len(), 1, "no half-member is left: {list:?}");
    c.etcd
        .preflight(&["prod-a".into()], &endpoints)
        .await
        .unwrap();

    // Waiting on a learner that is gone says so, instead of timing out as if it were slow.
    let err = c
        .etcd
        .await_learner_caught_up(&endpoints, learner.id, Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(matches!(err, EtcdError::MemberNotFound { .. }), "{err}");
}

/// A failed join removes its learner, and the retry reserves the same internal IP: the same peer URL is added
/// again at once. etcd would give it the removed member's id within the same second and refuse it ("member not
/// found"); `add_learner` waits for the next second and gets a fresh member.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_url_removed_a_moment_ago_can_be_added_again() {
    let mut c = Cluster::new();
    let a = c.target(1, "prod-a");
    c.start(1, "prod-a", None);
    c.wait_ready(&a).await;
    let endpoints = std::slice::from_ref(&a);
    let peer = c.peer_url(2);
    for round in 0..3 {
        let (first, _) = c.etcd.add_learner(endpoints, &peer).await.unwrap();
        c.etcd.remove_member(endpoints, first.id).await.unwrap();
        let (again, list) = c
            .etcd
            .add_learner(endpoints, &peer)
            .await
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_ne!(again.id, first.id, "a fresh member, not the removed one");
        assert!(list.iter().any(|m| m.id == again.id), "{list:?}");
        c.etcd.remove_member(endpoints, again.id).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_member_is_never_removed() {
    let mut c = Cluster::new();
    let a = c.target(1, "prod-a");
    c.start(1, "prod-a", None);
    c.wait_ready(&a).await;
    let id = c.etcd.status(&a).await.unwrap().member_id;
    let err = c
        .etcd
        .remove_member(std::slice::from_ref(&a), id)
        .await
        .unwrap_err();
    assert!(matches!(err, EtcdError::RemoveLastMember { .. }), "{err}");
    assert!(err.to_string().contains("prod-a"), "{err}");
}
