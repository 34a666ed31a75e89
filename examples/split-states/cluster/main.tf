# Split states (Terragrunt stacks): the cluster in this state, replicas in others (../replicas-east, and as many
# more as you like), each applied by its own `terraform apply`, also at the same time. The replica states read the
# cluster's `spec` from this state's output; membership and load-balancer changes stay serialized by the cluster's
# lock (labels on the static address, see ARCHITECTURE.md "The cluster lock").
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

resource "ha_master_cluster" "prod" {
  name                      = "prod-master"
  multizone                 = true
  etcd_client_source_ranges = ["127.0.0.0/8"]
}

# Everything a replica inherits, CA keys included: keep the state (and its backend) as private as the cluster's.
output "spec" {
  value     = ha_master_cluster.prod.spec
  sensitive = true
}
