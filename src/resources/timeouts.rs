//! Deadlines from the `timeouts` block, with each resource's defaults.

use std::time::Duration;

use tfplugin_framework::Val;
use tfplugin_framework::validator::{MAX_DURATION, parse_duration};
use tokio::time::Instant;

use super::Timeouts;

pub enum Op {
    Create,
    Update,
    Delete,
}

/// The deadline for `op`: the user's value if set (validated at plan), else `default`.
pub fn deadline(t: &Val<Timeouts>, op: Op, default: Duration) -> Instant {
    let set = t.known().and_then(|t| match op {
        Op::Create => t.create.known(),
        Op::Update => t.update.known(),
        Op::Delete => t.delete.known(),
    });
    let d = set.and_then(|s| parse_duration(s).ok()).unwrap_or(default);
    deadline_after(Instant::now(), d)
}

/// `now + d`, never overflowing: validation bounds `d` by [`MAX_DURATION`], and a value that got past it anyway
/// (a state written by another version, a default) is clamped to that bound rather than abort the provider, which
/// runs with `panic = "abort"` and would take every sibling operation down with it.
fn deadline_after(now: Instant, d: Duration) -> Instant {
    now.checked_add(d.min(MAX_DURATION))
        .or_else(|| now.checked_add(MAX_DURATION))
        .unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfplugin_framework::Val;

    fn timeouts(create: &str) -> Val<Timeouts> {
        Val::Known(Timeouts {
            create: Val::Known(create.into()),
            update: Val::Null,
            delete: Val::Null,
        })
    }

    #[test]
    fn no_value_overflows_the_deadline() {
        let default = Duration::from_secs(600);
        for bad in [
            "4000000000000000h",
            "99999999999999999999999h",
            "-1h",
            "0s",
            "",
            "5d",
        ] {
            let until = deadline(&timeouts(bad), Op::Create, default);
            assert!(
                until <= Instant::now() + default,
                "{bad}: falls back to the default"
            );
        }
        let now = Instant::now();
        assert_eq!(deadline_after(now, Duration::MAX), now + MAX_DURATION);
        let until = deadline(&timeouts("1h"), Op::Create, default);
        assert!(until > Instant::now() + Duration::from_secs(3500));
    }
}
