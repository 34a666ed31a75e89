//! The preflight before membership changes: against real etcd for what a real cluster can show, and on
//! fetched data for states that are hard to produce on purpose (members that disagree).

use etcd_client::{AlarmAction, AlarmOptions, AlarmType};

use super::Cluster;
use crate::preflight::{Change, View, problems};
use crate::{
    Alarm, AlarmKind, EndpointFailure, FailureKind, Health, Member, PreflightError,
    PreflightProblem,
};

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn messages(err: PreflightError) -> Vec<String> {
    err.problems.iter().map(|p| p.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_names_the_member_that_does_not_match_the_configuration() {
    let mut c = Cluster::new();
    let a = c.target(1, "prod-a");
    c.start(1, "prod-a", None);
    c.wait_ready(&a).await;
    // An endpoint that does not answer does not by itself fail the preflight: the quorum check decides.
    let endpoints = [a.clone(), c.target(9, "prod-gone")];

    c.etcd
        .preflight(&names(&["prod-a"]), &endpoints)
        .await
        .unwrap();

    let err = c
        .etcd
        .preflight(&names(&["prod-a", "prod-b"]), &endpoints)
        .await
        .unwrap_err();
    assert_eq!(
        messages(err),
        [
            "replica prod-b has no etcd member: its join did not finish; the next apply replaces it (or name it with `-replace`)"
        ]
    );

    let err = c
        .etcd
        .preflight(&names(&["prod-x"]), &endpoints)
        .await
        .unwrap_err();
    let got = messages(err);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(
        got[0].starts_with("member prod-a is not in the configuration (no replica VM of the cluster has its name): bring its replica back, or if it is gone for good remove it with `etcdctl member remove "),
        "{got:?}"
    );
    assert!(
        got[1].starts_with("replica prod-x has no etcd member"),
        "{got:?}"
    );

    // With nothing answering there is nothing to check against.
    let err = c
        .etcd
        .preflight(&names(&["prod-a"]), &endpoints[1..])
        .await
        .unwrap_err();
    assert!(
        matches!(&err.problems[..], [PreflightProblem::NoneReachable { failures }] if failures.len() == 1),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_catches_a_learner_left_by_an_interrupted_join() {
    let mut c = Cluster::new();
    let a = c.target(1, "prod-a");
    c.start(1, "prod-a", None);
    c.wait_ready(&a).await;

    // The join stopped after the learner booted and before promotion.
    let (learner, list) = c
        .etcd
        .add_learner(std::slice::from_ref(&a), &c.peer_url(2))
        .await
        .unwrap();
    c.start(
        2,
        "prod-q",
        Some(&crate::initial_cluster(&list, "prod-q", &c.peer_url(2)).unwrap()),
    );
    let q = c.target(2, "prod-q");
    c.wait_ready(&q).await;
    let endpoints = [a.clone(), q.clone()];
    let err = c
        .etcd
        .preflight(&names(&["prod-a", "prod-q"]), &endpoints)
        .await
        .unwrap_err();
    assert_eq!(
        messages(err),
        ["a learner prod-q from an interrupted join is still present: the next apply removes it"]
    );

    // The learner is healthy in itself; health reports it as such, with its role.
    let health = c.etcd.health(&endpoints).await;
    assert!(
        matches!(&health[1].health, Health::Healthy(s) if s.is_learner && s.member_id == learner.id),
        "{health:?}"
    );

    c.kill("prod-q");
    c.etcd.remove_member(&endpoints, learner.id).await.unwrap();
    c.etcd
        .preflight(&names(&["prod-a"]), &endpoints)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_and_health_report_a_raised_alarm() {
    let mut c = Cluster::new();
    let a = c.target(1, "prod-a");
    c.start(1, "prod-a", None);
    c.wait_ready(&a).await;
    let id = c.etcd.status(&a).await.unwrap().member_id;

    // Raise NOSPACE by hand (the Alarm RPC allows it), as a full backend would.
    let alarm = |action| {
        let etcd = c.etcd.clone();
        let a = a.clone();
        async move {
            etcd.call_one(&a, |mut client| async move {
                let mut options = AlarmOptions::new();
                options.with_member(id);
                client
                    .alarm(action, AlarmType::Nospace, Some(options))
                    .await
            })
            .await
            .unwrap();
        }
    };
    alarm(AlarmAction::Activate).await;

    assert_eq!(
        c.etcd.alarms(std::slice::from_ref(&a)).await.unwrap(),
        [Alarm {
            member_id: id,
            kind: AlarmKind::NoSpace
        }]
    );
    let err = c
        .etcd
        .preflight(&names(&["prod-a"]), std::slice::from_ref(&a))
        .await
        .unwrap_err();
    assert_eq!(
        messages(err),
        [
            "alarm NOSPACE on prod-a: resolve it (NOSPACE: compact and defragment; CORRUPT: replace that replica), then `etcdctl alarm disarm`"
        ]
    );
    let health = c.etcd.health(std::slice::from_ref(&a)).await;
    assert!(
        matches!(&health[0].health, Health::Unhealthy { reason, .. } if reason.contains("NOSPACE")),
        "{health:?}"
    );

    alarm(AlarmAction::Deactivate).await;
    c.etcd
        .preflight(&names(&["prod-a"]), std::slice::from_ref(&a))
        .await
        .unwrap();
}

fn member(id: u64, name: &str, learner: bool) -> Member {
    Member {
        id,
        name: name.to_string(),
        peer_urls: vec![format!("https://10.0.0.{id}:2380")],
        client_urls: Vec::new(),
        is_learner: learner,
    }
}

fn view(name: &str, members: Vec<Member>) -> View {
    View {
        name: name.to_string(),
        members: Ok(members),
    }
}

#[test]
fn preflight_rules_on_fetched_data() {
    let abc = || {
        vec![
            member(1, "a", false),
            member(2, "b", false),
            member(3, "c", false),
        ]
    };
    let expected = names(&["a", "b", "c"]);
    let no_alarms = Ok(Vec::new());

    // Agreement: the odd one out is named, whichever position it answers in.
    let views = [
        view("a", vec![member(1, "a", false), member(2, "b", false)]),
        view("b", abc()),
        view("c", abc()),
    ];
    let got: Vec<String> = problems(Change::Add, &expected, &views, &no_alarms)
        .iter()
        .map(|p| p.to_string())
        .collect();
    assert_eq!(
        got,
        [
            "a reports a different member list: etcd is mid-change or split; wait until `etcdctl member list` agrees on every replica, then apply again"
        ]
    );

    // A member that has not yet seen a newcomer's name agrees; the name comes from another member.
    let mut nameless = abc();
    nameless[2].name.clear();
    let views = [view("a", nameless), view("b", abc())];
    assert_eq!(problems(Change::Add, &expected, &views, &no_alarms), []);

    // A voter added but never started, and an alarm on a member.
    let mut list = abc();
    list[2].name.clear();
    let views = [view("a", list.clone()), view("b", list)];
    let alarms = Ok(vec![Alarm {
        member_id: 2,
        kind: AlarmKind::NoSpace,
    }]);
    let got: Vec<String> = problems(Change::Add, &names(&["a", "b"]), &views, &alarms)
        .iter()
        .map(|p| p.to_string())
        .collect();
    assert_eq!(
        got,
        [
            "member 3 (https://10.0.0.3:2380) was added but never started: remove it with `etcdctl member remove 3`, then apply again",
            "alarm NOSPACE on b: resolve it (NOSPACE: compact and defragment; CORRUPT: replace that replica), then `etcdctl alarm disarm`"
        ]
    );

    // Alarms that cannot be read are not "no alarms".
    let views = [view("a", abc())];
    let got = problems(Change::Add, &expected, &views, &Err("timed out".into()));
    assert_eq!(
        got,
        [PreflightProblem::AlarmsUnknown {
            reason: "timed out".into()
        }]
    );

    // A learner refusing the member list is not counted as unreachable.
    let refused = |kind| EndpointFailure {
        endpoint: "127.0.0.1:2379".parse().unwrap(),
        server_name: "q".into(),
        kind,
        message: "x".into(),
    };
    let views = [
        View {
            name: "q".into(),
            members: Err(refused(FailureKind::Learner)),
        },
        View {
            name: "a".into(),
            members: Err(refused(FailureKind::Unreachable)),
        },
    ];
    let got = problems(Change::Add, &expected, &views, &no_alarms);
    assert!(
        matches!(&got[..], [PreflightProblem::NoneReachable { failures }] if failures.len() == 1),
        "{got:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removal_preflight_waives_the_leaving_member_only() {
    let mut c = Cluster::new();
    let a = c.target(1, "prod-a");
    c.start(1, "prod-a", None);
    c.wait_ready(&a).await;

    // A join that stopped after adding its learner and before booting the VM: the learner never starts.
    let (learner, _) = c
        .etcd
        .add_learner(std::slice::from_ref(&a), &c.peer_url(2))
        .await
        .unwrap();
    // Its endpoint never answers, as a dead VM's would not.
    let endpoints = [a.clone(), c.target(2, "prod-q")];

    // Adding another member is refused while the learner is there...
    let err = c
        .etcd
        .preflight(&names(&["prod-a"]), &endpoints)
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err.problems[..],
            [PreflightProblem::LeftoverLearner { .. }]
        ),
        "{err}"
    );
    // ...but removing that very learner is allowed, though it is unreachable and never started.
    c.etcd
        .preflight_removal(&[learner.id], &names(&["prod-a"]), &endpoints)
        .await
        .unwrap();
    // Removing another member does not waive the learner.
    let a_id = c.etcd.status(&a).await.unwrap().member_id;
    let err = c
        .etcd
        .preflight_removal(&[a_id], &names(&[]), &endpoints)
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err.problems[..],
            [PreflightProblem::LeftoverLearner { .. }]
        ),
        "{err}"
    );

    c.etcd.remove_member(&endpoints, learner.id).await.unwrap();
    c.etcd
        .preflight(&names(&["prod-a"]), &endpoints)
        .await
        .unwrap();
}

#[test]
fn removal_rules_on_fetched_data() {
    let abc = || {
        vec![
            member(1, "a", false),
            member(2, "b", false),
            member(3, "c", false),
        ]
    };
    let no_alarms: Result<Vec<Alarm>, String> = Ok(Vec::new());
    let got = |change, expected: &[&str], views: &[View], alarms: &Result<Vec<Alarm>, String>| {
        problems(change, &names(expected), views, alarms)
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
    };
    let short = |v: Vec<String>| -> Vec<String> {
        v.iter()
            .map(|s| s.split(':').next().unwrap().to_string())
            .collect()
    };

    // The vanished-VM replacement: c's VM is gone (so c is not among the replicas that stay) and c does not
    // answer; a and b agree. Removing c passes; adding anything would not.
    let views = [view("a", abc()), view("b", abc())];
    assert_eq!(
        got(Change::Remove(&[3]), &["a", "b"], &views, &no_alarms),
        Vec::<String>::new()
    );
    assert_eq!(
        short(got(Change::Add, &["a", "b"], &views, &no_alarms)),
        ["member c is not in the configuration (no replica VM of the cluster has its name)"]
    );

    // The crashed-VM replacement: c's VM still exists but is stopped; c is removed through a and b.
    let views = [
        view("a", abc()),
        view("b", abc()),
        View {
            name: "c".into(),
            members: Err(EndpointFailure {
                endpoint: "127.0.0.1:2379".parse().unwrap(),
                server_name: "c".into(),
                kind: FailureKind::Unreachable,
                message: "connection refused".into(),
            }),
        },
    ];
    assert_eq!(
        got(Change::Remove(&[3]), &["a", "b"], &views, &no_alarms),
        Vec::<String>::new()
    );

    // The leaving member's alarm does not block its removal; another member's does.
    let alarm = |id| {
        Ok(vec![Alarm {
            member_id: id,
            kind: AlarmKind::Corrupt,
        }])
    };
    assert_eq!(
        got(Change::Remove(&[3]), &["a", "b"], &views, &alarm(3)),
        Vec::<String>::new()
    );
    assert_eq!(
        short(got(Change::Remove(&[3]), &["a", "b"], &views, &alarm(1))),
        ["alarm CORRUPT on a"]
    );

    // Disagreement among the members that answer blocks a removal as it blocks an addition.
    let views = [
        view("a", vec![member(1, "a", false), member(2, "b", false)]),
        view("b", abc()),
        view("c", abc()),
    ];
    assert_eq!(
        short(got(Change::Remove(&[3]), &["a", "b"], &views, &no_alarms)),
        ["a reports a different member list"]
    );

    // An unknown member or a replica without a member, other than the leaving one, blocks.
    let mut with_x = abc();
    with_x.push(member(4, "x", false));
    let views = [view("a", with_x.clone()), view("b", with_x)];
    assert_eq!(
        short(got(
            Change::Remove(&[3]),
            &["a", "b", "d"],
            &views,
            &no_alarms
        )),
        [
            "member x is not in the configuration (no replica VM of the cluster has its name)",
            "replica d has no etcd member"
        ]
    );

    // Two learners left by two interrupted joins: clearing both is one removal change; one alone is not.
    let mut learners = abc();
    learners.push(member(5, "", true));
    learners.push(member(6, "", true));
    let views = [view("a", learners.clone()), view("b", learners)];
    assert_eq!(
        got(
            Change::Remove(&[5, 6]),
            &["a", "b", "c"],
            &views,
            &no_alarms
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        short(got(
            Change::Remove(&[5]),
            &["a", "b", "c"],
            &views,
            &no_alarms
        )),
        ["a learner https"]
    );

    // Unreadable alarms are not "no alarms", for a removal either.
    let views = [view("a", abc())];
    assert_eq!(
        short(got(
            Change::Remove(&[3]),
            &["a", "b"],
            &views,
            &Err("timed out".into())
        )),
        ["could not list etcd alarms (timed out)"]
    );
}
