# Provider-defined functions (Terraform >= 1.8, OpenTofu >= 1.7) let you write your own guards. This one refuses
# an even number of replicas: 2 tolerates no more failures than 1, and 4 no more than 3.
terraform {
  required_providers {
    ha = {
      source = "registry.terraform.io/hamaster/ha"
    }
  }
}

variable "zones" {
  type    = list(string)
  default = ["us-central1-a", "us-central1-b", "us-central1-c"]
}

provider "ha" {
  project = "ha-sim"
  zone    = "us-central1-a"
}

resource "ha_master_cluster" "main" {
  name                      = "main-master"
  multizone                 = true
  etcd_client_source_ranges = ["127.0.0.0/8"]

  lifecycle {
    precondition {
      condition     = length(var.zones) == 1 || provider::ha::fault_tolerance(length(var.zones)) > provider::ha::fault_tolerance(length(var.zones) - 1)
      error_message = "Use 1, 3 or 5 replicas: ${length(var.zones)} tolerates ${provider::ha::fault_tolerance(length(var.zones))} failed members, no more than ${length(var.zones) - 1} would."
    }
  }
}

resource "ha_master_replica" "master" {
  for_each = toset(var.zones)
  cluster  = ha_master_cluster.main.spec
  zone     = each.value
}
