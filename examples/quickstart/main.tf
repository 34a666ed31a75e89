# Three masters in three zones of one region, behind the cluster's static IP.
terraform {
  required_providers {
    ha = {
      source = "hamaster/ha"
    }
  }
}

variable "project" {
  type    = string
  default = "ha-sim"
}

variable "admin_cidr" {
  description = "Where Terraform runs: the provider manages etcd membership through etcd's client port."
  type        = string
  default     = "127.0.0.0/8"
}

provider "ha" {
  project = var.project
  region  = "europe-west1"
  # Point at ha-sim (make demo does this via GOOGLE_COMPUTE_CUSTOM_ENDPOINT); leave unset for Google Cloud.
}

resource "ha_master_cluster" "prod" {
  name      = "prod-master"
  zone      = "europe-west1-b"
  multizone = true

  etcd_client_source_ranges = [var.admin_cidr]
  labels                    = { team = "platform" }
}

resource "ha_master_replica" "master" {
  for_each = toset(["europe-west1-b", "europe-west1-c", "europe-west1-d"])

  cluster = ha_master_cluster.prod.spec
  zone    = each.value
}

output "endpoint" {
  value = ha_master_cluster.prod.endpoint
}
