//! The preflight before membership changes: against real etcd for what a real cluster can show, and on
//! fetched data for states that are hard to produce on purpose (members that disagree).

use etcd_client::{AlarmAction, AlarmOptions, AlarmType};

use super::Cluster;
use crate::etcd::preflight::{View, problems};
use crate::etcd::{
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
    assert_eq!(messages(err), ["replica prod-b has no etcd member"]);

    let err = c
        .etcd
        .preflight(&names(&["prod-x"]), &endpoints)
        .await
        .unwrap_err();
    assert_eq!(
        messages(err),
        [
            "member prod-a is not in the configuration",
            "replica prod-x has no etcd member"
        ]
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
        Some(&crate::etcd::initial_cluster(&list, "prod-q", &c.peer_url(2)).unwrap()),
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
    assert_eq!(messages(err), ["alarm NOSPACE on prod-a"]);
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
    let got: Vec<String> = problems(&expected, &views, &no_alarms)
        .iter()
        .map(|p| p.to_string())
        .collect();
    assert_eq!(got, ["a reports a different member list"]);

    // A member that has not yet seen a newcomer's name agrees; the name comes from another member.
    let mut nameless = abc();
    nameless[2].name.clear();
    let views = [view("a", nameless), view("b", abc())];
    assert_eq!(problems(&expected, &views, &no_alarms), []);

    // A voter added but never started, and an alarm on a member.
    let mut list = abc();
    list[2].name.clear();
    let views = [view("a", list.clone()), view("b", list)];
    let alarms = Ok(vec![Alarm {
        member_id: 2,
        kind: AlarmKind::NoSpace,
    }]);
    let got: Vec<String> = problems(&names(&["a", "b"]), &views, &alarms)
        .iter()
        .map(|p| p.to_string())
        .collect();
    assert_eq!(
        got,
        [
            "member 3 (https://10.0.0.3:2380) was added but never started",
            "alarm NOSPACE on b"
        ]
    );

    // Alarms that cannot be read are not "no alarms".
    let views = [view("a", abc())];
    let got = problems(&expected, &views, &Err("timed out".into()));
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
    let got = problems(&expected, &views, &no_alarms);
    assert!(
        matches!(&got[..], [PreflightProblem::NoneReachable { failures }] if failures.len() == 1),
        "{got:?}"
    );
}
