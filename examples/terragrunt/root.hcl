# Included by every unit (`include "root"`): the provider block each unit's module is run with. Terragrunt writes
# it into the unit's working copy as provider.tf. The Compute and Secret Manager endpoints and credentials come
# from the environment (GOOGLE_COMPUTE_CUSTOM_ENDPOINT, GOOGLE_SECRET_MANAGER_CUSTOM_ENDPOINT and
# GOOGLE_OAUTH_ACCESS_TOKEN for ha-sim); on Google Cloud leave them unset and use your usual credentials.
#
# State: give every unit its own state, as private as the identity that applies it. The cluster unit's state holds
# the cluster's private keys (`private_keys`), so only the cluster's own pipeline should read it; a replica unit
# reads the cluster's `spec` output (no private key in it: the keys live in Secret Manager). With a GCS backend:
#   remote_state {
#     backend = "gcs"
#     config  = { bucket = "my-terraform-state", prefix = "ha/${path_relative_to_include()}" }
#   }
generate "provider" {
  path      = "provider.tf"
  if_exists = "overwrite"
  contents  = <<EOT
terraform {
  required_providers {
    ha = {
      source = "registry.terraform.io/hamaster/ha"
    }
  }
}

provider "ha" {
  project = "ha-sim"
  region  = "europe-west1"
}
EOT
}
