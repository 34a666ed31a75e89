# The admin kubeconfig in a root module of its own, beside the cluster's (../quickstart). The cluster's root module,
# the one a drift job plans with `-detailed-exitcode`, then holds nothing that changes by itself; this one writes a
# fresh file at the first apply of each UTC day, and plans nothing in between.
#
# Terraform >= 1.10: the ephemeral resource, whose certificate is never in a plan or state. OpenTofu before 1.11:
# the same arguments in `data "ha_admin_credentials"` (its certificate is stored in this module's state; keep that
# state as private as the file), and `data.` for `ephemeral.` below (docs/guides/kubectl.md).
terraform {
  required_providers {
    ha = {
      source = "registry.terraform.io/hamaster/ha"
    }
  }
}

variable "project" {
  type    = string
  default = "ha-sim"
}

variable "cluster_state" {
  description = "The cluster's root module state (here a local file; with a remote backend, name it below)."
  type        = string
  default     = "../quickstart/terraform.tfstate"
}

# The Compute and Secret Manager endpoints and credentials come from the environment, as for the cluster.
provider "ha" {
  project = var.project
  region  = "europe-west1"
}

# The cluster's `spec` output (sensitive): everything a credential needs, read from the cluster's state.
data "terraform_remote_state" "cluster" {
  backend = "local"
  config = {
    path = var.cluster_state
  }
}

ephemeral "ha_admin_credentials" "admin" {
  cluster  = data.terraform_remote_state.cluster.outputs.spec
  validity = "24h"
}

resource "terraform_data" "kubeconfig" {
  # Rewritten at the first apply of each UTC day: the 24 h certificate outlives the day it was written on, and a
  # plan later the same day is empty. (`timestamp()` here would replace it, and show a change, on every run.)
  triggers_replace = [formatdate("YYYY-MM-DD", plantimestamp())]

  provisioner "local-exec" {
    command     = "umask 077 && printf '%s' \"$KUBECONFIG_YAML\" > admin.kubeconfig"
    environment = { KUBECONFIG_YAML = ephemeral.ha_admin_credentials.admin.kubeconfig }
  }
}
