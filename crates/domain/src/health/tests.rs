use super::*;

const NOW: i64 = 1_800_000_000;
const DAY: i64 = 24 * 3600;

fn replica(name: &str, status: &str) -> ReplicaFacts {
    ReplicaFacts {
        name: name.into(),
        zone: format!("zone-{name}"),
        vm_status: status.into(),
        certificates_expire_at: Some(NOW + 365 * DAY),
        backend_healthy: Some(status == "RUNNING"),
    }
}

fn member(id: u64, name: &str, state: MemberState) -> MemberFacts {
    let answered = matches!(state, MemberState::Healthy | MemberState::Unhealthy(_));
    MemberFacts {
        id,
        name: name.into(),
        learner: false,
        state,
        db_size: answered.then_some(20480),
        leader_id: answered.then_some(1),
    }
}

/// Three replicas, three healthy voters led by `a`, a load balancer holding the static IP, a recent backup.
fn healthy_three() -> Facts {
    Facts {
        cluster: "prod".into(),
        replicas: ["a", "b", "c"].map(|n| replica(n, "RUNNING")).into(),
        members: Some(vec![
            member(1, "a", MemberState::Healthy),
            member(2, "b", MemberState::Healthy),
            member(3, "c", MemberState::Healthy),
        ]),
        etcd_unreachable: None,
        alarms: vec![],
        ip_holder: IpHolder::ForwardingRule,
        load_balancer: true,
        last_backup: Some("gs://b/prod/1.db".into()),
        backup_policy: true,
        backup_error: None,
        keys_error: None,
        ca_expires_at: Some(NOW + 3650 * DAY),
        renew_before: Duration::from_secs(30 * DAY as u64),
    }
}

#[test]
fn a_healthy_cluster_names_its_leader_and_what_it_tolerates() {
    let v = judge(&healthy_three(), NOW);
    assert!(v.healthy, "{v:?}");
    assert_eq!(v.problems, Vec::<String>::new());
    assert_eq!(v.notes, Vec::<String>::new());
    assert_eq!((v.leader.as_deref(), v.leader_id), (Some("a"), Some(1)));
    assert_eq!((v.voters, v.healthy_voters, v.fault_tolerance), (3, 3, 1));
    assert_eq!(
        v.summary,
        "healthy: 3 of 3 etcd voters healthy, tolerates 1 failure"
    );

    // One replica: no load balancer, the VM holds the static IP, nothing to tolerate.
    let mut one = healthy_three();
    one.replicas.truncate(1);
    one.members.as_mut().unwrap().truncate(1);
    one.ip_holder = IpHolder::Instance("a".into());
    one.load_balancer = false;
    one.replicas[0].backend_healthy = None;
    let v = judge(&one, NOW);
    assert!(v.healthy, "{v:?}");
    assert_eq!(
        v.summary,
        "healthy: 1 of 1 etcd voters healthy, tolerates 0 failures"
    );
}

/// Each way a cluster can be unhealthy, one at a time, with the words its problem must carry.
#[test]
fn each_fault_is_one_problem_naming_what_is_wrong() {
    type Edit = fn(&mut Facts);
    let table: &[(&str, Edit, &[&str])] = &[
        (
            "a stopped replica",
            |f| {
                f.replicas[1].vm_status = "TERMINATED".into();
                f.replicas[1].backend_healthy = Some(false);
                f.members.as_mut().unwrap()[1] = member(
                    2,
                    "b",
                    MemberState::Unreachable("connection refused".into()),
                );
            },
            &["Replica b's VM is TERMINATED"],
        ),
        (
            "a learner that has not started (a join stopped half way)",
            |f| {
                f.members.as_mut().unwrap().push(MemberFacts {
                    learner: true,
                    ..member(0xabc, "", MemberState::NotAsked)
                });
            },
            &["etcd member abc (not started) is a learner"],
        ),
        (
            "lost quorum",
            |f| {
                for i in [1, 2] {
                    f.replicas[i].vm_status = "TERMINATED".into();
                    f.replicas[i].backend_healthy = Some(false);
                }
                let m = f.members.as_mut().unwrap();
                m[0] = member(1, "a", MemberState::Unhealthy("no leader".into()));
                m[0].leader_id = Some(0);
                for (i, name) in [(1, "b"), (2, "c")] {
                    m[i] = member(
                        i as u64 + 1,
                        name,
                        MemberState::Unreachable("timed out".into()),
                    );
                }
            },
            &[
                "etcd has no quorum: 0 of 3 voters are healthy and 2 are needed",
                "etcd member a is unhealthy: no leader",
                "Replica b's VM is TERMINATED",
                "Replica c's VM is TERMINATED",
            ],
        ),
        (
            "etcd unreachable from where Terraform runs",
            |f| {
                f.members = None;
                f.etcd_unreachable = Some("tried 10.0.0.2:2379; connection refused".into());
            },
            &["etcd did not answer through any replica: tried 10.0.0.2:2379"],
        ),
        (
            "a raised alarm",
            |f| f.alarms = vec!["NOSPACE on member 1".into()],
            &["etcd alarm NOSPACE on member 1"],
        ),
        (
            "a replica out of the pool",
            |f| f.replicas[2].backend_healthy = None,
            &["Replica c is not in the load balancer's pool"],
        ),
        (
            "a running replica whose health check fails",
            |f| f.replicas[0].backend_healthy = Some(false),
            &["The load balancer's health check fails on replica a"],
        ),
        (
            "nobody holds the static IP",
            |f| f.ip_holder = IpHolder::Nobody,
            &["Nothing serves the cluster's static IP"],
        ),
        (
            "a running VM that is not a member",
            |f| {
                f.members.as_mut().unwrap().remove(2);
            },
            &["Replica c's VM runs but is not an etcd member"],
        ),
        (
            "a member whose VM is gone",
            |f| {
                f.replicas.remove(2);
            },
            &["etcd member c has no replica VM"],
        ),
        (
            "expired replica certificates",
            |f| f.replicas[0].certificates_expire_at = Some(NOW - 1),
            &["Replica a's certificates expired at"],
        ),
        (
            "the CA keys' secret gone",
            |f| {
                f.keys_error = Some(
                    "Cluster prod's CA keys are missing: secret projects/p/secrets/prod-cluster-keys does not \
                     exist. Run `terraform apply`."
                        .into(),
                )
            },
            &["Cluster prod's CA keys are missing"],
        ),
        (
            "an expired CA",
            |f| f.ca_expires_at = Some(NOW),
            &["The cluster's CA expired at"],
        ),
        (
            "no replica at all",
            |f| {
                f.replicas.clear();
                f.members = None;
                f.ip_holder = IpHolder::Nobody;
                f.load_balancer = false;
            },
            &["No replica VM of cluster \"prod\" exists"],
        ),
    ];
    for (case, edit, expected) in table {
        let mut facts = healthy_three();
        edit(&mut facts);
        let v = judge(&facts, NOW);
        assert!(!v.healthy, "{case}: judged healthy: {v:?}");
        assert_eq!(
            v.problems.len(),
            expected.len(),
            "{case}: problems {:#?}",
            v.problems
        );
        for words in *expected {
            assert!(
                v.problems.iter().any(|p| p.contains(words)),
                "{case}: no problem says {words:?}: {:#?}",
                v.problems
            );
            assert!(v.summary.contains(words), "{case}: {}", v.summary);
        }
        assert!(
            v.summary
                .starts_with(&format!("unhealthy: {} problem", expected.len())),
            "{case}: {}",
            v.summary
        );
    }
}

#[test]
fn a_stopped_replica_leaves_no_fault_tolerance_and_no_leader_is_named_without_agreement() {
    let mut f = healthy_three();
    f.members.as_mut().unwrap()[2] = member(3, "c", MemberState::Unreachable("refused".into()));
    let v = judge(&f, NOW);
    // Its VM runs, so the member not answering is the problem.
    assert_eq!(v.problems.len(), 1, "{:#?}", v.problems);
    assert!(v.problems[0].starts_with("etcd member c does not answer: refused"));
    assert_eq!((v.voters, v.healthy_voters, v.fault_tolerance), (3, 2, 0));
    assert_eq!(v.leader.as_deref(), Some("a"));

    // Two members that name different leaders (mid-election): no leader is named.
    f.members.as_mut().unwrap()[1].leader_id = Some(2);
    let v = judge(&f, NOW);
    assert_eq!((v.leader, v.leader_id), (None, None));
}

#[test]
fn renewal_a_nearing_ca_and_a_missing_backup_are_notes_not_problems() {
    let mut f = healthy_three();
    f.replicas[1].certificates_expire_at = Some(NOW + 10 * DAY);
    f.ca_expires_at = Some(NOW + 100 * DAY);
    f.last_backup = None;
    let v = judge(&f, NOW);
    assert!(v.healthy, "{v:?}");
    assert_eq!(v.notes.len(), 3, "{:#?}", v.notes);
    assert!(v.notes[0].starts_with("Replica b's certificates expire at"));
    assert!(v.notes[1].starts_with("The cluster's CA expires at"));
    assert!(v.notes[2].contains("no snapshot"));

    // Without a backup policy, no snapshot is expected.
    f.backup_policy = false;
    assert_eq!(judge(&f, NOW).notes.len(), 2);

    // A location that cannot be listed says why, still as a note.
    f.backup_policy = true;
    f.backup_error = Some("403 Forbidden".into());
    let v = judge(&f, NOW);
    assert!(v.healthy);
    assert_eq!(
        v.notes[2],
        "The backup location could not be listed: 403 Forbidden"
    );
}
