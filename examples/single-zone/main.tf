# One master in the cluster's primary zone: the starting point kube-up creates. Add replicas by adding
# ha_master_replica resources; the second puts the static IP behind a load balancer.
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

resource "ha_master_cluster" "dev" {
  name                      = "dev-master"
  etcd_client_source_ranges = ["127.0.0.0/8"]
}

resource "ha_master_replica" "first" {
  cluster = ha_master_cluster.dev.spec
}
