//! The project itself: who `default` is when an instance names the default service account.

use super::Compute;
use super::error::{Error, Result};
use google_cloud_gax::options::RequestOptionsBuilder;
use tokio::time::Instant;

impl Compute {
    /// The email of the project's Compute Engine default service account (`projects.get`'s
    /// `defaultServiceAccount`, `<project number>-compute@developer.gserviceaccount.com`): what an instance's
    /// `default` becomes, and what an IAM binding must name instead.
    pub async fn default_service_account(&self, deadline: Instant) -> Result<String> {
        let project = self.project()?;
        let resource = format!("project {project}");
        let p = self
            .attempt(&resource, "get", deadline, || {
                self.clients
                    .projects
                    .get()
                    .set_project(project)
                    .with_user_agent(self.user_agent())
                    .send()
            })
            .await?;
        p.default_service_account
            .filter(|e| !e.is_empty())
            .ok_or_else(|| {
                Error::Config(format!(
                    "project {project} has no default Compute Engine service account (it was deleted?): set the \
                     cluster's `service_account` to the email of the account the masters run as"
                ))
            })
    }
}
