//! Plan-time checks of where the configuration puts a cluster or a replica, and what it boots, asked of Compute
//! Engine: a misspelt zone, machine type or image is refused before anything is created, not found by the first
//! disk of an apply (or, in a roll, after a master was stopped). A region's zones are
//! asked once per provider process (one Terraform command), however many replicas name them, and the Compute
//! client is built only to ask: building one (credentials, TLS roots) costs ~20 ms of CPU, which once per replica
//! made a 200-replica plan take 10 s (`make bench`, 2026-11-27).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use tokio::time::Instant;

use super::cloud::Cloud;
use super::context::ClusterCtx;
use super::error::{OpError, Result};
use ha_settings::Settings;

/// How long a plan-time question to Compute Engine may take (retries included) before the plan goes on without its
/// answer (regions.get answers in well under a second); the apply then meets the same problem with the API's own
/// sentence.
pub const PLAN_CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// Why Compute Engine could not be asked, once it could not: the rest of the command's plan does not ask again, so
/// a plan without credentials or network waits once, not once per resource.
static UNANSWERED: OnceLock<String> = OnceLock::new();

/// The zones of each region asked so far, by project and region; `None` for a region Compute Engine does not know.
type Zones = HashMap<(String, String), Option<Vec<String>>>;

fn asked() -> std::sync::MutexGuard<'static, Zones> {
    static ASKED: OnceLock<Mutex<Zones>> = OnceLock::new();
    ASKED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// The zones `region` has in `project`, `None` if Compute Engine does not know the region; `connect` makes the
/// client, called only when the answer is not known yet.
async fn zones_of<F>(project: &str, region: &str, connect: F) -> Result<Option<Vec<String>>>
where
    F: AsyncFnOnce() -> Result<Cloud>,
{
    let key = (project.to_string(), region.to_string());
    if let Some(known) = asked().get(&key) {
        return Ok(known.clone());
    }
    if let Some(why) = UNANSWERED.get() {
        return Err(OpError::Other(format!("not asked: {why}")));
    }
    let cloud = connect().await?;
    let deadline = Instant::now() + PLAN_CHECK_TIMEOUT;
    let zones = match cloud.compute.get_region(region, deadline).await {
        Ok(r) => Some(r.zones),
        Err(e) if e.is_not_found() => None,
        Err(e) => {
            let _ = UNANSWERED.set(e.to_string());
            return Err(e.into());
        }
    };
    asked().insert(key, zones.clone());
    Ok(zones)
}

/// Refuses (`OpError::Refused`) a region Compute Engine does not know, or a zone its region does not have, naming
/// the closest zone that exists. Other errors (no credentials yet, the API unreachable) are returned as they are;
/// the caller decides whether a plan goes on without the answer.
pub async fn check_location(
    settings: &Settings,
    project: &str,
    region: &str,
    zone: Option<&str>,
) -> Result<()> {
    check_location_with(project, region, zone, async || {
        Cloud::connect(settings, project).await
    })
    .await
}

async fn check_location_with<F>(
    project: &str,
    region: &str,
    zone: Option<&str>,
    connect: F,
) -> Result<()>
where
    F: AsyncFnOnce() -> Result<Cloud>,
{
    let Some(zones) = zones_of(project, region, connect).await? else {
        let (summary, detail) = ha_domain::zones::unknown_region(region);
        return Err(OpError::Refused(summary, detail));
    };
    if let Some(zone) = zone
        && let Some((summary, detail)) = ha_domain::zones::check_zone_exists(zone, region, &zones)
    {
        return Err(OpError::Refused(summary, detail));
    }
    Ok(())
}

/// Yes-or-no answers Compute Engine gave this process, by question.
type Answers<K> = OnceLock<Mutex<HashMap<K, bool>>>;

/// The answer to `key` from `answers`, or else asked once with `ask` on a client `connect` makes, and kept. A
/// failure to ask is kept too ([`UNANSWERED`]): the rest of the command's plan does not ask again.
async fn ask_once<K, F, A>(answers: &'static Answers<K>, key: K, connect: F, ask: A) -> Result<bool>
where
    K: std::hash::Hash + Eq,
    F: AsyncFnOnce() -> Result<Cloud>,
    A: AsyncFnOnce(&Cloud, Instant) -> ha_gce::Result<bool>,
{
    let kept = |a: &'static Answers<K>| {
        a.get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    };
    if let Some(answer) = kept(answers).get(&key).copied() {
        return Ok(answer);
    }
    if let Some(why) = UNANSWERED.get() {
        return Err(OpError::Other(format!("not asked: {why}")));
    }
    let cloud = connect().await?;
    match ask(&cloud, Instant::now() + PLAN_CHECK_TIMEOUT).await {
        Ok(answer) => {
            kept(answers).insert(key, answer);
            Ok(answer)
        }
        Err(e) => {
            let _ = UNANSWERED.set(e.to_string());
            Err(e.into())
        }
    }
}

/// Whether each zone offers each predefined machine type asked so far, by project, zone and type.
static OFFERED: Answers<(String, String, String)> = OnceLock::new();

/// Refuses (`OpError::Refused`) a predefined machine type that `zone` does not offer (`machineTypes.get`), asked
/// once per process for each zone and type. Custom types are not asked. Other errors are returned as they are, as
/// for [`check_location`].
pub async fn check_machine_type(
    settings: &Settings,
    project: &str,
    zone: &str,
    machine_type: &str,
) -> Result<()> {
    check_machine_type_with(project, zone, machine_type, async || {
        Cloud::connect(settings, project).await
    })
    .await
}

async fn check_machine_type_with<F>(
    project: &str,
    zone: &str,
    machine_type: &str,
    connect: F,
) -> Result<()>
where
    F: AsyncFnOnce() -> Result<Cloud>,
{
    let Some(name) = ha_domain::machine_type::predefined_name(machine_type) else {
        return Ok(());
    };
    let key = (project.to_string(), zone.to_string(), name.to_string());
    let is_offered = ask_once(&OFFERED, key, connect, async |cloud, deadline| {
        cloud
            .compute
            .machine_type_offered(zone, name, deadline)
            .await
    })
    .await?;
    if is_offered {
        return Ok(());
    }
    let (summary, detail) = ha_domain::machine_type::not_offered(name, zone);
    Err(OpError::Refused(summary, detail))
}

/// Whether each image asked so far exists, by its reference.
static IMAGES: Answers<ha_domain::image::ImageRef> = OnceLock::new();

/// Refuses (`OpError::Refused`) an `image` Compute Engine does not have (`images.get`, or `images.getFromFamily`
/// for a family), asked once per process for each image. A reference of another shape is not asked. Other errors
/// are returned as they are, as for [`check_location`].
pub async fn check_image(settings: &Settings, project: &str, image: &str) -> Result<()> {
    check_image_with(project, image, async || {
        Cloud::connect(settings, project).await
    })
    .await
}

async fn check_image_with<F>(project: &str, image: &str, connect: F) -> Result<()>
where
    F: AsyncFnOnce() -> Result<Cloud>,
{
    use ha_domain::image::ImageRef;
    let Some(wanted) = ImageRef::parse(image, project) else {
        return Ok(());
    };
    let exists = ask_once(&IMAGES, wanted.clone(), connect, async |cloud, deadline| {
        image_found(&cloud.compute, &wanted, deadline).await
    })
    .await?;
    if exists {
        return Ok(());
    }
    let (summary, detail) = wanted.not_found();
    Err(OpError::Refused(summary, detail))
}

/// Whether Compute Engine has `image`: `images.get` for a named image, `images.getFromFamily` for a family.
async fn image_found(
    compute: &ha_gce::Compute,
    image: &ha_domain::image::ImageRef,
    deadline: Instant,
) -> ha_gce::Result<bool> {
    use ha_domain::image::ImageRef;
    match image {
        ImageRef::Named { project, name } => compute.image_exists(project, name, deadline).await,
        ImageRef::Family { project, family } => {
            compute.image_family_exists(project, family, deadline).await
        }
    }
}

/// Asks Compute Engine again, with no answer kept, whether it still has what replica `me`'s roll `steps` would boot
/// (`domain::boot_check`): the caller holds the cluster's lock and has not run a step yet; `down` says whether
/// the replica's VM is stopped or gone already. Refuses
/// (`OpError::Refused`) an image or machine type that is gone; other errors are returned as they are, and stop the
/// roll before it starts as well.
pub async fn check_still_bootable(
    ctx: &ClusterCtx,
    me: &str,
    zone: &str,
    steps: &[ha_domain::step::Step],
    down: bool,
    deadline: Instant,
) -> Result<()> {
    use ha_domain::boot_check::{boot_asks, withdrawn};
    use ha_domain::image::ImageRef;
    let asks = boot_asks(steps);
    let master = &ctx.spec.master;
    if asks.image
        && let Some(wanted) = ImageRef::parse(&master.image, &ctx.spec.project)
        && !image_found(&ctx.compute, &wanted, deadline).await?
    {
        let (summary, detail) = withdrawn(me, wanted.not_found(), "image", down);
        return Err(OpError::Refused(summary, detail));
    }
    if asks.machine_type
        && let Some(name) = ha_domain::machine_type::predefined_name(&master.machine_type)
        && !ctx
            .compute
            .machine_type_offered(zone, name, deadline)
            .await?
    {
        let gone = ha_domain::machine_type::not_offered(name, zone);
        let (summary, detail) = withdrawn(me, gone, "machine_type", down);
        return Err(OpError::Refused(summary, detail));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ha_gce::tests::Sim;
    use std::sync::atomic::Ordering;

    #[tokio::test]
    async fn a_misspelt_zone_or_region_is_refused_with_the_closest_zone() {
        let sim = Sim::start().await;
        let connects = std::sync::atomic::AtomicUsize::new(0);
        let check = async |region: &str, zone: Option<&str>| {
            check_location_with("proj", region, zone, async || {
                connects.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok(Cloud {
                    compute: sim.compute().await,
                    settings: sim.settings(),
                    project: "proj".into(),
                })
            })
            .await
        };
        check("europe-west1", Some("europe-west1-c")).await.unwrap();
        check("europe-west1", None).await.unwrap();
        match check("europe-west1", Some("europe-west1-q")).await {
            Err(OpError::Refused(summary, detail)) => {
                assert_eq!(summary, "Zone europe-west1-q does not exist");
                assert!(
                    detail.contains("The closest is `europe-west1-b`."),
                    "{detail}"
                );
            }
            other => panic!("a misspelt zone was not refused: {:?}", other.err()),
        }
        match check("europe-west7", Some("europe-west7-b")).await {
            Err(OpError::Refused(summary, _)) => {
                assert_eq!(summary, "Region europe-west7 does not exist")
            }
            other => panic!("an unknown region was not refused: {:?}", other.err()),
        }
        // Asked once: a second check of the same region makes no call (the answer is kept for the process), and
        // builds no client.
        let (calls, clients) = (
            sim.calls("regions.get").await,
            connects.load(Ordering::SeqCst),
        );
        check("europe-west1", Some("europe-west1-d")).await.unwrap();
        assert_eq!(sim.calls("regions.get").await, calls);
        assert_eq!(connects.load(Ordering::SeqCst), clients);
        assert_eq!(clients, 2, "one client per region asked");
    }

    #[tokio::test]
    async fn a_machine_type_the_zone_does_not_offer_is_refused_and_each_is_asked_once() {
        let sim = Sim::start().await;
        let check = async |zone: &str, t: &str| {
            check_machine_type_with("proj", zone, t, async || {
                Ok(Cloud {
                    compute: sim.compute().await,
                    settings: sim.settings(),
                    project: "proj".into(),
                })
            })
            .await
        };
        check("europe-west1-b", "e2-standard-4").await.unwrap();
        match check("europe-west1-b", "e2-standard-3").await {
            Err(OpError::Refused(summary, _)) => assert_eq!(
                summary,
                "Machine type e2-standard-3 does not exist in zone europe-west1-b"
            ),
            other => panic!("a misspelt type was not refused: {:?}", other.err()),
        }
        // A custom type is made to measure: not asked.
        let calls = sim.calls("machineTypes.get").await;
        check("europe-west1-b", "n2-custom-4-16384").await.unwrap();
        check("europe-west1-b", "e2-standard-4").await.unwrap();
        assert_eq!(sim.calls("machineTypes.get").await, calls, "asked once");
        assert_eq!(calls, 2);
    }

    #[tokio::test]
    async fn an_image_compute_engine_does_not_have_is_refused_and_each_is_asked_once() {
        let sim = Sim::start().await;
        let check = async |image: &str| {
            check_image_with("proj", image, async || {
                Ok(Cloud {
                    compute: sim.compute().await,
                    settings: sim.settings(),
                    project: "proj".into(),
                })
            })
            .await
        };
        check(ha_domain::image::DEFAULT_FOR_NEW).await.unwrap();
        check("projects/cos-cloud/global/images/cos-stable-121-18867-294-5")
            .await
            .unwrap();
        for (image, said) in [
            (
                "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts",
                "Image family ubuntu-2404-lts does not exist in project ubuntu-os-cloud",
            ),
            (
                "projects/cos-cloud/global/images/cos-stable-1",
                "Image cos-stable-1 does not exist in project cos-cloud",
            ),
        ] {
            match check(image).await {
                Err(OpError::Refused(summary, _)) => assert_eq!(summary, said),
                other => panic!("{image} was not refused: {:?}", other.err()),
            }
        }
        let asked = (
            sim.calls("images.get").await,
            sim.calls("images.getFromFamily").await,
        );
        assert_eq!(asked, (2, 2));
        // Asked once per process; a shape plan cannot read is not asked.
        check(ha_domain::image::DEFAULT_FOR_NEW).await.unwrap();
        check("ubuntu").await.unwrap();
        let again = (
            sim.calls("images.get").await,
            sim.calls("images.getFromFamily").await,
        );
        assert_eq!(again, asked);
    }
}
