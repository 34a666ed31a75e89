//! Failpoints as data: *when* (a request or an operation kind matches) × *then* (an effect), for N hits or
//! until cleared. Added and listed through `/_sim/faults` and `ha-sim fault add`.
//!
//! A failpoint prints as `request(POST instances.insert)=status(503)x2` or `operation(instances.*)=fail(QUOTA_EXCEEDED)`,
//! the same notation as etcd's gofail (`name=effect`), so logs and test names read alike.
//! One-off out-of-band events (crash a VM, take a zone down...) are in [`events`].

pub mod events;

use serde::{Deserialize, Serialize};

/// What a failpoint matches.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "on", rename_all = "camelCase")]
pub enum Trigger {
    /// An API request. Every given field must match; `*` in a pattern matches any run of characters.
    Request {
        /// HTTP method, e.g. `POST`.
        #[serde(default)]
        method: Option<String>,
        /// API method pattern, e.g. `instances.insert`, `*.get`.
        #[serde(default)]
        api: Option<String>,
        /// URL path pattern, e.g. `/compute/v1/projects/*/zones/*/instances*`.
        #[serde(default)]
        path: Option<String>,
    },
    /// An operation being accepted, by kind (`instances.insert`, `targetPools.*`).
    Operation { kind: String },
}

/// A request's `fail` code that answers as Google does for an API the project has not enabled (403
/// PERMISSION_DENIED with an `ErrorInfo` of reason `SERVICE_DISABLED`). Secret Manager requests only: a project
/// upgraded from a release before Secret Manager may not have enabled it.
pub const SERVICE_DISABLED: &str = "SERVICE_DISABLED";

/// What happens when it matches.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "effect", rename_all = "camelCase")]
pub enum Effect {
    /// Answer the request with this HTTP status (429, 500, 503...) in Google's error shape, without acting.
    Status { status: u16 },
    /// Delay the request's response, or the operation's completion, by this much.
    Delay { ms: u64 },
    /// The operation ends DONE with this error code (QUOTA_EXCEEDED, ZONE_RESOURCE_POOL_EXHAUSTED...) and has no
    /// effect.
    Fail {
        code: String,
        #[serde(default)]
        message: Option<String>,
    },
    /// The operation stays RUNNING until failpoints are cleared; a request is held unanswered until then, and
    /// then answered 503 without acting (its caller, killed meanwhile, is gone: `Sim::hold_until_faults_cleared`).
    Stall,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Failpoint {
    #[serde(default)]
    pub id: u64,
    pub when: Trigger,
    pub then: Effect,
    /// How many matches it fires for; `None` = until cleared.
    #[serde(default)]
    pub times: Option<u32>,
    /// How many times it has fired.
    #[serde(default)]
    pub hits: u32,
    /// Read-only: the printed form.
    #[serde(default)]
    pub name: String,
    /// Fire on a share of matches only, drawn from a seed (random API faults); `None` = every match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chance: Option<Chance>,
    /// How many matches pass before it fires (counted down as they pass): the resume matrix stops an apply at
    /// the second VM insert of a restore, not only the first.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub skip: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A share of matches, drawn from a seed so that a run's sequence of draws replays: the same seed and the same
/// order of matching requests fire on the same ones.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Chance {
    /// Percent of matches that fire, in (0, 100].
    pub percent: f64,
    pub seed: u64,
    /// The generator's state, advanced on every match (starts from the seed).
    #[serde(default)]
    pub state: u64,
}

impl Chance {
    /// Draws once: whether this match fires. xorshift64* is plenty for choosing which calls fail.
    fn draw(&mut self) -> bool {
        if self.state == 0 {
            self.state = self.seed | 1;
        }
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        let x = self.state.wrapping_mul(0x2545_f491_4f6c_dd1d);
        ((x >> 11) as f64 / (1u64 << 53) as f64) * 100.0 < self.percent
    }
}

impl Failpoint {
    /// A failpoint that fires on every match until cleared; `times` and `chance` narrow it.
    pub fn new(when: Trigger, then: Effect) -> Failpoint {
        Failpoint {
            id: 0,
            when,
            then,
            times: None,
            hits: 0,
            name: String::new(),
            chance: None,
            skip: 0,
        }
    }

    /// Lets the next `n` matches pass, then fires.
    pub fn after(self, n: u32) -> Failpoint {
        Failpoint { skip: n, ..self }
    }

    /// Fires for the next `n` matches only.
    pub fn times(self, n: u32) -> Failpoint {
        Failpoint {
            times: Some(n),
            ..self
        }
    }

    /// Fires on `percent` of matches, drawn from `seed`.
    pub fn chance(self, percent: f64, seed: u64) -> Failpoint {
        Failpoint {
            chance: Some(Chance {
                percent,
                seed,
                state: 0,
            }),
            ..self
        }
    }

    /// Rejects combinations that mean nothing (an HTTP status for an operation, a stalled request).
    pub fn validate(&self) -> Result<(), String> {
        if let Some(c) = &self.chance
            && !(c.percent > 0.0 && c.percent <= 100.0)
        {
            return Err(format!("a chance of {}% is not in (0, 100]", c.percent));
        }
        match (&self.when, &self.then) {
            (Trigger::Request { .. }, Effect::Status { status }) if (400..600).contains(status) => {
                Ok(())
            }
            (Trigger::Request { .. }, Effect::Status { status }) => {
                Err(format!("status {status} is not an error"))
            }
            (Trigger::Request { .. }, Effect::Delay { .. } | Effect::Stall) => Ok(()),
            (Trigger::Request { api: Some(api), .. }, Effect::Fail { code, .. })
                if code == SERVICE_DISABLED && api.starts_with("secretmanager.") =>
            {
                Ok(())
            }
            (
                Trigger::Operation { .. },
                Effect::Fail { .. } | Effect::Stall | Effect::Delay { .. },
            ) => Ok(()),
            (w, t) => Err(format!("{} cannot {}", trigger_name(w), effect_name(t))),
        }
    }

    fn exhausted(&self) -> bool {
        self.times.is_some_and(|t| self.hits >= t)
    }
}

fn trigger_name(t: &Trigger) -> String {
    match t {
        Trigger::Request { method, api, path } => {
            let parts: Vec<&str> = [method, api, path]
                .iter()
                .filter_map(|p| p.as_deref())
                .collect();
            format!(
                "request({})",
                if parts.is_empty() {
                    "*".to_string()
                } else {
                    parts.join(" ")
                }
            )
        }
        Trigger::Operation { kind } => format!("operation({kind})"),
    }
}

fn effect_name(e: &Effect) -> String {
    match e {
        Effect::Status { status } => format!("status({status})"),
        Effect::Delay { ms } => format!("delay({ms}ms)"),
        Effect::Fail { code, .. } => format!("fail({code})"),
        Effect::Stall => "stall()".to_string(),
    }
}

impl std::fmt::Display for Failpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}={}",
            trigger_name(&self.when),
            effect_name(&self.then)
        )?;
        if let Some(c) = &self.chance {
            write!(f, "~{}%#{}", c.percent, c.seed)?;
        }
        if self.skip > 0 {
            write!(f, "@after{}", self.skip)?;
        }
        match self.times {
            Some(n) => write!(f, "x{n}"),
            None => Ok(()),
        }
    }
}

/// `*` matches any run of characters (including `/`); everything else literally.
pub fn glob(pattern: &str, s: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == s,
        Some((head, rest)) => {
            let Some(s) = s.strip_prefix(head) else {
                return false;
            };
            (0..=s.len())
                .filter(|i| s.is_char_boundary(*i))
                .any(|i| glob(rest, &s[i..]))
        }
    }
}

/// What a request is, for matching.
pub struct RequestFacts<'a> {
    pub method: &'a str,
    pub api: &'a str,
    pub path: &'a str,
}

/// The registry of active failpoints.
#[derive(Default, Debug)]
pub struct Faults {
    next_id: u64,
    points: Vec<Failpoint>,
}

impl Faults {
    pub fn add(&mut self, mut fp: Failpoint) -> Result<Failpoint, String> {
        fp.validate()?;
        self.next_id += 1;
        fp.id = self.next_id;
        fp.hits = 0;
        fp.name = fp.to_string();
        self.points.push(fp.clone());
        Ok(fp)
    }

    pub fn list(&self) -> Vec<Failpoint> {
        self.points.clone()
    }

    /// Removes one failpoint (`Some(id)`) or all; returns how many were removed.
    pub fn clear(&mut self, id: Option<u64>) -> usize {
        let before = self.points.len();
        self.points.retain(|p| id.is_some_and(|id| p.id != id));
        before - self.points.len()
    }

    /// Fires every live failpoint whose trigger matches, counting hits; returns their effects in order.
    fn fire(&mut self, matches: impl Fn(&Trigger) -> bool) -> Vec<Effect> {
        let mut out = Vec::new();
        for p in self
            .points
            .iter_mut()
            .filter(|p| !p.exhausted() && matches(&p.when))
        {
            if p.skip > 0 {
                p.skip -= 1;
                continue;
            }
            if let Some(chance) = &mut p.chance
                && !chance.draw()
            {
                continue;
            }
            p.hits += 1;
            out.push(p.then.clone());
        }
        // Spent failpoints are dropped so `list` shows only what can still fire.
        self.points.retain(|p| !p.exhausted());
        out
    }

    pub fn on_request(&mut self, r: &RequestFacts) -> Vec<Effect> {
        self.fire(|t| match t {
            Trigger::Request { method, api, path } => {
                method
                    .as_deref()
                    .is_none_or(|m| m.eq_ignore_ascii_case(r.method))
                    && api.as_deref().is_none_or(|a| glob(a, r.api))
                    && path.as_deref().is_none_or(|p| glob(p, r.path))
            }
            Trigger::Operation { .. } => false,
        })
    }

    pub fn on_operation(&mut self, kind: &str) -> Vec<Effect> {
        self.fire(|t| matches!(t, Trigger::Operation { kind: k } if glob(k, kind)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(when: Trigger, then: Effect, times: Option<u32>) -> Failpoint {
        Failpoint {
            id: 0,
            when,
            then,
            times,
            hits: 0,
            name: String::new(),
            chance: None,
            skip: 0,
        }
    }

    #[test]
    fn a_failpoint_after_n_lets_that_many_matches_pass_then_fires() {
        let mut f = Faults::default();
        f.add(
            Failpoint::new(
                Trigger::Operation {
                    kind: "instances.insert".into(),
                },
                Effect::Stall,
            )
            .after(2)
            .times(1),
        )
        .unwrap();
        assert_eq!(
            f.list()[0].name,
            "operation(instances.insert)=stall()@after2x1"
        );
        assert!(f.on_operation("instances.insert").is_empty());
        assert!(f.on_operation("instances.delete").is_empty());
        assert!(f.on_operation("instances.insert").is_empty());
        assert_eq!(f.on_operation("instances.insert"), vec![Effect::Stall]);
        assert!(f.list().is_empty(), "spent");
    }

    #[test]
    fn a_failpoint_with_a_chance_fires_on_that_share_and_replays_from_its_seed() {
        let when = Trigger::Request {
            method: None,
            api: None,
            path: None,
        };
        let facts = RequestFacts {
            method: "GET",
            api: "instances.get",
            path: "/p",
        };
        let run = |seed| {
            let mut f = Faults::default();
            let mut p = fp(when.clone(), Effect::Status { status: 503 }, None);
            p.chance = Some(Chance {
                percent: 5.0,
                seed,
                state: 0,
            });
            let added = f.add(p).unwrap();
            assert_eq!(added.name, format!("request(*)=status(503)~5%#{seed}"));
            (0..10_000)
                .map(|_| !f.on_request(&facts).is_empty())
                .collect::<Vec<bool>>()
        };
        let fired = run(7).iter().filter(|b| **b).count();
        assert!(
            (400..600).contains(&fired),
            "5% of 10,000 fired {fired} times"
        );
        assert_eq!(run(7), run(7), "the same seed fires on the same matches");
        assert_ne!(run(7), run(8), "another seed, other matches");
        let mut bad = fp(when, Effect::Status { status: 503 }, None);
        bad.chance = Some(Chance {
            percent: 0.0,
            seed: 1,
            state: 0,
        });
        assert!(Faults::default().add(bad).is_err());
    }

    #[test]
    fn globs_match_like_shell_stars() {
        assert!(glob("instances.*", "instances.insert"));
        assert!(glob("*.get", "instances.get"));
        assert!(glob(
            "/compute/v1/*/instances",
            "/compute/v1/projects/p/zones/z/instances"
        ));
        assert!(!glob("instances.*", "addresses.insert"));
        assert!(glob("*", ""));
    }

    #[test]
    fn a_counted_failpoint_fires_n_times_then_disappears() {
        let mut f = Faults::default();
        let when = Trigger::Request {
            method: Some("POST".into()),
            api: Some("instances.insert".into()),
            path: None,
        };
        let added = f
            .add(fp(when, Effect::Status { status: 503 }, Some(2)))
            .unwrap();
        assert_eq!(added.name, "request(POST instances.insert)=status(503)x2");
        let post = RequestFacts {
            method: "POST",
            api: "instances.insert",
            path: "/x",
        };
        let get = RequestFacts {
            method: "GET",
            api: "instances.insert",
            path: "/x",
        };
        assert!(f.on_request(&get).is_empty());
        assert_eq!(f.on_request(&post), vec![Effect::Status { status: 503 }]);
        assert_eq!(f.on_request(&post).len(), 1);
        assert!(f.on_request(&post).is_empty());
        assert!(f.list().is_empty());
    }

    #[test]
    fn meaningless_combinations_are_refused() {
        let mut f = Faults::default();
        let op = Trigger::Operation {
            kind: "instances.insert".into(),
        };
        assert!(
            f.add(fp(op.clone(), Effect::Status { status: 503 }, None))
                .is_err()
        );
        let req = Trigger::Request {
            method: None,
            api: None,
            path: None,
        };
        // A stalled request is held until failpoints are cleared (a call in flight when its caller is killed).
        assert!(f.add(fp(req.clone(), Effect::Stall, None)).is_ok());
        assert!(
            f.add(fp(
                req.clone(),
                Effect::Fail {
                    code: "QUOTA_EXCEEDED".into(),
                    message: None
                },
                None
            ))
            .is_err()
        );
        assert!(
            f.add(fp(req, Effect::Status { status: 200 }, None))
                .is_err()
        );
        // A disabled API: Secret Manager's requests only (Compute is always enabled where a cluster runs).
        let disabled = || Effect::Fail {
            code: SERVICE_DISABLED.into(),
            message: None,
        };
        let on = |api: &str| Trigger::Request {
            method: None,
            api: Some(api.into()),
            path: None,
        };
        assert!(f.add(fp(on("secretmanager.*"), disabled(), None)).is_ok());
        assert!(f.add(fp(on("instances.insert"), disabled(), None)).is_err());
        let added = f
            .add(fp(
                op,
                Effect::Fail {
                    code: "QUOTA_EXCEEDED".into(),
                    message: None,
                },
                None,
            ))
            .unwrap();
        assert_eq!(
            added.name,
            "operation(instances.insert)=fail(QUOTA_EXCEEDED)"
        );
        assert_eq!(f.on_operation("instances.insert").len(), 1);
        assert_eq!(
            f.on_operation("instances.insert").len(),
            1,
            "uncounted failpoints persist"
        );
        // The stalled request's, the disabled API's and the failed operation's.
        assert_eq!(f.clear(None), 3);
    }
}
