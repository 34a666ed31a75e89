//! `ha_master_cluster`'s `validate`: each attribute's rules that need no cloud call and no other resource, so a
//! mistake is named at `terraform validate`, on the attribute's own line.

use tfplugin::diag::{AttributePath, Diagnostics};
use tfplugin_framework::Val;

use super::cluster_model::{ClusterModel, Restore};
use ha_domain::{names, zones};

pub(super) fn validate(c: &ClusterModel, diags: &mut Diagnostics) {
    backup_keep(c, diags);
    if let Val::Known(r) = &c.restore {
        restore_block(r, c.backup.is_null(), diags);
    }
    certificate_lifetimes(c, diags);
    placement_and_machines(c, diags);
    super::cluster_ca::validate(c, diags);
}

fn backup_keep(c: &ClusterModel, diags: &mut Diagnostics) {
    if let Val::Known(b) = &c.backup
        && let Some(keep) = b.keep.known()
        && !(1..=i64::from(ha_domain::backup::MAX_KEEP)).contains(keep)
    {
        diags.attr_error(
            AttributePath::attr("backup").then_attr("keep"),
            format!("backup.keep is {keep}"),
            format!(
                "Keep between 1 and {} snapshots: the newest is the one a restore needs, and each is as \
                 large as etcd's database.",
                ha_domain::backup::MAX_KEEP
            ),
        );
    }
}

fn restore_block(r: &Restore, no_backup: bool, diags: &mut Diagnostics) {
    use ha_domain::{recovery::SURVIVING_MEMBER, restore::SNAPSHOT, start_empty::EMPTY};
    let source = r.source.known().map(String::as_str);
    if let Some(source) = source
        && source != SURVIVING_MEMBER
        && source != SNAPSHOT
        && source != EMPTY
    {
        diags.attr_error(
            AttributePath::attr("restore").then_attr("source"),
            format!("Unknown restore source {source:?}"),
            format!(
                "`restore.source` must be \"{SURVIVING_MEMBER}\" (recover etcd from the member that \
                 survives with its data), \"{SNAPSHOT}\" (restore a Cloud Storage snapshot when no \
                 member survives) or \"{EMPTY}\" (start a new, empty etcd on purpose when no member \
                 survives)."
            ),
        );
    }
    let at = AttributePath::attr("restore").then_attr("snapshot");
    if let Some(url) = r.snapshot.known() {
        if source.is_some_and(|s| s != SNAPSHOT) {
            diags.attr_error(
                at,
                "restore.snapshot is set for another source",
                format!(
                    "A snapshot is restored only with `source = \"{SNAPSHOT}\"`; remove `snapshot`, \
                     or set the source."
                ),
            );
        } else if let Err(m) = ha_domain::restore::parse_url(url) {
            diags.attr_error(at, "restore.snapshot is not a Cloud Storage object", m);
        }
    } else if source == Some(SNAPSHOT) && no_backup {
        // At `source`: the missing `snapshot` has no line of its own to point at.
        diags.attr_error(
            AttributePath::attr("restore").then_attr("source"),
            "No snapshot to restore is named",
            "With `source = \"snapshot\"` and no `backup` block, name the snapshot: `snapshot = \
             \"gs://<bucket>/<object>\"`. With a `backup` block, the newest of the cluster's \
             snapshots there is restored.",
        );
    }
    if let Some(g) = r.generation.known()
        && *g < 1
    {
        diags.attr_error(
            AttributePath::attr("restore").then_attr("generation"),
            format!("restore.generation is {g}"),
            "`restore.generation` starts at 1 and only goes up: raise it by one to run a recovery.",
        );
    }
}

fn certificate_lifetimes(c: &ClusterModel, diags: &mut Diagnostics) {
    if let (Some(v), Some(r)) = (
        c.certificate_validity.known(),
        c.certificate_renew_before.known(),
    ) && let (Ok(v), Ok(r)) = (
        tfplugin_framework::validator::parse_duration_within(
            v,
            ha_domain::certificates::MAX_LIFETIME,
        ),
        tfplugin_framework::validator::parse_duration_within(
            r,
            ha_domain::certificates::MAX_LIFETIME,
        ),
    ) && let Err((summary, detail)) = ha_domain::certificates::check_lifetimes(v, r)
    {
        diags.attr_error(
            AttributePath::attr("certificate_renew_before"),
            summary,
            detail,
        );
    }
}

fn placement_and_machines(c: &ClusterModel, diags: &mut Diagnostics) {
    if let (Some(zone), Some(region)) = (c.zone.known(), c.region.known())
        && zones::check_zone(zone).is_ok()
        && zones::region_of(zone) != Some(region.as_str())
    {
        diags.attr_error(
            AttributePath::attr("zone"),
            format!("Zone {zone:?} is not in region {region:?}"),
            format!(
                "The primary zone must be in the cluster's region. Use a zone of {region} (like \
                 {region}-b), or leave `region` out to take it from the zone."
            ),
        );
    }
    for (attr, v, min) in [
        ("boot_disk_size_gb", &c.boot_disk_size_gb, 10),
        ("data_disk_size_gb", &c.data_disk_size_gb, 10),
    ] {
        if let Some(size) = v.known()
            && (*size < min || *size > 65536)
        {
            diags.attr_error(
                AttributePath::attr(attr),
                format!("Disk size {size} GB is out of range"),
                format!("GCE persistent disks here must be between {min} and 65536 GB."),
            );
        }
    }
    if c.etcd_quorum_read.known() == Some(&false) {
        diags.attr_error(
            AttributePath::attr("etcd_quorum_read"),
            "Quorum reads cannot be turned off",
            "kube-apiserver has always read from etcd with quorum since Kubernetes 1.13, so \
             `etcd_quorum_read = false` cannot be honoured. Remove the setting or set it to true.",
        );
    }
    if let Some(port) = c.api_port.known()
        && !(1..=65535).contains(port)
    {
        diags.attr_error(
            AttributePath::attr("api_port"),
            format!("Port {port} is not a TCP port"),
            "Use a port between 1 and 65535, usually 443.",
        );
    }
    if let Some(tags) = c.tags.known() {
        for t in tags {
            if let Err((summary, detail)) = names::check_instance_name(t) {
                diags.attr_error(
                    AttributePath::attr("tags"),
                    summary.replace("name", "network tag"),
                    detail,
                );
            }
        }
    }
}
