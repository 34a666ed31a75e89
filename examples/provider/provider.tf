# On Google Cloud, leave the endpoint and credentials unset: the provider uses Application Default Credentials
# (or `credentials`, `access_token`, `impersonate_service_account`), as Google's own provider does.
provider "ha" {
  project = "my-project"
  region  = "europe-west1"
  zone    = "europe-west1-b"
}
