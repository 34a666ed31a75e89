# Three masters in three zones of one region, behind the cluster's static IP.
# `make demo` applies this against ha-sim, then scales it to one replica and back.
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

variable "zones" {
  description = "One replica per zone. 1, 3 or 5: an even count tolerates no more failures than one fewer."
  type        = list(string)
  default     = ["europe-west1-b", "europe-west1-c", "europe-west1-d"]
}

variable "admin_cidr" {
  description = "Where Terraform runs: the provider manages etcd membership through etcd's client port."
  type        = string
  default     = "127.0.0.0/8"
}

variable "api_port" {
  description = "The API port on the static IP (ha-sim not running as root serves 443 on 6443; use 6443 there)."
  type        = number
  default     = 443
}

# The Compute endpoint and credentials come from the environment (GOOGLE_COMPUTE_CUSTOM_ENDPOINT and
# GOOGLE_OAUTH_ACCESS_TOKEN for ha-sim); on Google Cloud, leave them unset and use your usual credentials.
provider "ha" {
  project = var.project
  region  = "europe-west1"
}

resource "ha_master_cluster" "prod" {
  name      = "prod-master"
  zone      = "europe-west1-b"
  multizone = true
  api_port  = var.api_port

  etcd_client_source_ranges = [var.admin_cidr]
  labels                    = { team = "platform" }
}

resource "ha_master_replica" "master" {
  for_each = toset(var.zones)

  cluster = ha_master_cluster.prod.spec
  zone    = each.value
}

output "endpoint" {
  value = ha_master_cluster.prod.endpoint
}

output "replicas" {
  value = { for zone, r in ha_master_replica.master : zone => r.name }
}

# What a credential needs (examples/kubeconfig reads it from this state): the endpoint, the CAs, the settings.
output "spec" {
  value     = ha_master_cluster.prod.spec
  sensitive = true
}
