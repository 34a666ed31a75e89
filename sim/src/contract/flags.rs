//! Which flags each program accepts, per release, from tables taken from upstream source (`flags/*.tsv`, each
//! naming its source), and which values a release refuses (`flags/values.tsv`). A flag a table does not list for
//! the release is refused the way the program refuses it (pflag: `unknown flag`): the tables list every flag the
//! masters may pass, so a new flag needs a row, with its source, before a master may use it.

use super::release::{Version, bound};
use super::{Master, Refusal};
use crate::contract::master::{Container, parse_flags};

/// A program whose flags are judged, and how its release is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Program {
    KubeApiserver,
    KubeControllerManager,
    KubeScheduler,
    Kubelet,
    CloudControllerManager,
    ClusterAutoscaler,
}

impl Program {
    pub fn name(self) -> &'static str {
        match self {
            Program::KubeApiserver => "kube-apiserver",
            Program::KubeControllerManager => "kube-controller-manager",
            Program::KubeScheduler => "kube-scheduler",
            Program::Kubelet => "kubelet",
            Program::CloudControllerManager => "cloud-controller-manager",
            Program::ClusterAutoscaler => "cluster-autoscaler",
        }
    }

    /// The program an image runs, by its repository.
    pub fn of_image(image: &str) -> Option<Program> {
        let repo = image.rsplit_once(':').map_or(image, |(r, _)| r);
        Some(match repo.rsplit('/').next()? {
            "kube-apiserver" => Program::KubeApiserver,
            "kube-controller-manager" => Program::KubeControllerManager,
            "kube-scheduler" => Program::KubeScheduler,
            "cloud-controller-manager" => Program::CloudControllerManager,
            "cluster-autoscaler" => Program::ClusterAutoscaler,
            _ => return None,
        })
    }

    /// The release its tables are keyed by: the Kubernetes minor for Kubernetes' own programs, the image's major
    /// for cloud-provider-gcp (`30`), the minor for cluster-autoscaler (`1.30`).
    pub fn release(self, image: &str, master: &Version) -> Option<Version> {
        match self {
            Program::Kubelet => Some(master.clone()),
            Program::CloudControllerManager => Version::of_image_tag(image, 1),
            Program::ClusterAutoscaler => Version::of_image_tag(image, 2),
            _ => Version::of_kubernetes_image(image),
        }
    }

    fn table(self) -> &'static str {
        match self {
            Program::KubeApiserver => include_str!("flags/kube-apiserver.tsv"),
            Program::KubeControllerManager => include_str!("flags/kube-controller-manager.tsv"),
            Program::KubeScheduler => include_str!("flags/kube-scheduler.tsv"),
            Program::Kubelet => include_str!("flags/kubelet.tsv"),
            Program::CloudControllerManager => include_str!("flags/cloud-controller-manager.tsv"),
            Program::ClusterAutoscaler => include_str!("flags/cluster-autoscaler.tsv"),
        }
    }

    /// What the program logs for a flag it does not define, before it exits (each table's header names the source).
    pub fn unknown_flag(self, flag: &str) -> String {
        match self {
            // k8s.io/component-base cli/run.go prints cobra's error before logging starts.
            Program::KubeApiserver
            | Program::KubeControllerManager
            | Program::KubeScheduler
            | Program::CloudControllerManager => format!("Error: unknown flag: --{flag}"),
            // The kubelet parses its flags itself and logs the failure through klog.
            Program::Kubelet => {
                format!(
                    "\"command failed\" err=\"failed to parse kubelet flag: unknown flag: --{flag}\""
                )
            }
            // pflag's own error, then the usage.
            Program::ClusterAutoscaler => format!("unknown flag: --{flag}"),
        }
    }

    /// The table file, for sentences.
    pub fn table_path(self) -> String {
        format!("sim/src/contract/flags/{}.tsv", self.name())
    }
}

const VALUES: &str = include_str!("flags/values.tsv");

/// The non-comment rows of a table, split on tabs.
fn rows(table: &str) -> impl Iterator<Item = Vec<&str>> {
    table
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|l| l.split('\t').map(str::trim).collect())
}

/// Whether `program` at `release` accepts `flag`, and the source row that says so.
pub(crate) fn accepts(program: Program, release: &Version, flag: &str) -> Result<bool, String> {
    for row in rows(program.table()) {
        let [name, since, until, ..] = row[..] else {
            return Err(format!(
                "{}: row {row:?} has fewer than 3 fields",
                program.table_path()
            ));
        };
        if name == flag && release.within(bound(since)?.as_ref(), bound(until)?.as_ref()) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// A value a release refuses: (what the program logs, the upstream source).
pub(crate) fn refused_value(
    program: Program,
    release: &Version,
    flag: &str,
    value: &str,
    argv: &[String],
) -> Result<Option<(String, String)>, String> {
    for row in rows(VALUES) {
        let [component, name, refused, since, until, says, source, ..] = row[..] else {
            return Err(format!(
                "sim/src/contract/flags/values.tsv: row {row:?} has fewer than 7 fields"
            ));
        };
        if component != program.name() || name != flag {
            continue;
        }
        // `*`: the flag itself is gone. A list flag (`--feature-gates=A=false,B=true`) refuses a value when it
        // holds the refused item.
        let given = refused == "*"
            || value == refused
            || value.split(',').any(|item| item.trim() == refused);
        // An eighth field lifts the rule when the argv passes that item (`feature-gates=DisableCloudProviders=false`
        // turns the in-tree provider back on in 1.29 and 1.30).
        let lifted = row
            .get(7)
            .and_then(|u| u.split_once('='))
            .is_some_and(|(f, item)| {
                parse_flags(argv)
                    .iter()
                    .any(|(k, v)| k == f && v.split(',').any(|i| i.trim() == item))
            });
        if given && !lifted && release.within(bound(since)?.as_ref(), bound(until)?.as_ref()) {
            return Ok(Some((says.to_string(), source.to_string())));
        }
    }
    Ok(None)
}

/// Every flag of every judged program on the master, against its release's table and value rules.
pub(crate) fn check(master: &Master<'_>) -> Result<(), Refusal> {
    for c in master.containers.iter().filter(|c| !c.init) {
        if let Some(program) = Program::of_image(&c.image) {
            check_argv(program, &c.image, &master.release, &c.flags(), Some(c))?;
        }
    }
    if let Some(argv) = &master.kubelet {
        check_argv(Program::Kubelet, "", &master.release, argv, None)?;
    }
    Ok(())
}

fn check_argv(
    program: Program,
    image: &str,
    master: &Version,
    argv: &[String],
    container: Option<&Container>,
) -> Result<(), Refusal> {
    let whose = match container {
        Some(c) => format!("{}, container `{}`", c.manifest, c.name),
        None => "its systemd drop-in".to_string(),
    };
    let refuse = |cause: String| Refusal::new(program.name(), format!("{cause} ({whose})"));
    let release = program.release(image, master).ok_or_else(|| {
        refuse(format!(
            "the image {image:?} names no release the flag tables know"
        ))
    })?;
    let table_error = |e: String| refuse(format!("the contract's own table is broken: {e}"));
    for (flag, value) in parse_flags(argv) {
        if flag.is_empty() {
            return Err(refuse(format!(
                "argument {value:?} is not a flag; the contract wants --flag=value"
            )));
        }
        if !accepts(program, &release, &flag).map_err(table_error)? {
            return Err(refuse(format!(
                "release {release} has no flag --{flag}, and the program exits at start with {} \
                     (flags accepted per release: {})",
                program.unknown_flag(&flag),
                program.table_path()
            )));
        }
        if let Some((says, source)) =
            refused_value(program, &release, &flag, &value, argv).map_err(table_error)?
        {
            return Err(refuse(format!(
                "release {release} refuses --{flag}={value}: \"{says}\" (source: {source})"
            )));
        }
    }
    Ok(())
}
