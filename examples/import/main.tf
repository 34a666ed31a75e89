# Adopting a running cluster (made by another configuration, or by kube-up's scripts once its masters carry the
# label `ha-master-cluster=<name>`) into this configuration. `terraform plan` shows the imports and in-place
# updates only; after `terraform apply` the plan is empty. The CA private keys are not recoverable (masters never
# hold them), so this cluster can keep, repair and remove its replicas but not add new ones.
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
  etcd_client_source_ranges = ["127.0.0.0/8"]
}

resource "ha_master_replica" "first" {
  cluster = ha_master_cluster.prod.spec
  name    = "prod-master"
}

resource "ha_master_replica" "second" {
  cluster = ha_master_cluster.prod.spec
  name    = "prod-master-a1f"
}

import {
  to = ha_master_cluster.prod
  id = "ha-sim/us-central1/prod-master"
}

import {
  to = ha_master_replica.first
  id = "ha-sim/us-central1-b/prod-master"
}

# Terraform >= 1.12 can import by identity instead of id (OpenTofu 1.6 cannot parse this form):
#   identity = { project = "ha-sim", zone = "us-central1-b", name = "prod-master-a1f" }
import {
  to = ha_master_replica.second
  id = "ha-sim/us-central1-b/prod-master-a1f"
}
