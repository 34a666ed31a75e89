# Replicas of ../cluster in a state of their own. Apply the cluster first; then this state and any other replica
# state may be applied at the same time: the provider processes take turns on the cluster's lock, and one waiting
# says whom it waits for (TF_LOG_PROVIDER=info) and gives up at the replica's create timeout.
terraform {
  required_providers {
    ha = {
      source = "registry.terraform.io/hamaster/ha"
    }
  }
}

provider "ha" {
  project = "ha-sim"
  zone    = "us-central1-b"
}

# With Terragrunt, a `dependency` block passing `spec` as an input does the same (../../terragrunt).
data "terraform_remote_state" "cluster" {
  backend = "local"
  config = {
    path = "../cluster/terraform.tfstate"
  }
}

resource "ha_master_replica" "east" {
  for_each = toset(["us-central1-c", "us-central1-f"])
  cluster  = data.terraform_remote_state.cluster.outputs.spec
  zone     = each.value
}
