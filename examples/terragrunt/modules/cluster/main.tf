# The cluster unit's module (../../cluster/terragrunt.hcl sets its inputs; root.hcl writes its provider block).
variable "name" {
  type = string
}

variable "zone" {
  type = string
}

variable "machine_type" {
  type = string
}

variable "etcd_client_source_ranges" {
  description = "Where the replica units' Terraform runs: the provider manages etcd membership through etcd's client port."
  type        = list(string)
}

variable "deletion_protection" {
  type = bool
}

resource "ha_master_cluster" "this" {
  name                      = var.name
  zone                      = var.zone
  multizone                 = true
  machine_type              = var.machine_type
  etcd_client_source_ranges = var.etcd_client_source_ranges
  deletion_protection       = var.deletion_protection
}

# What every replica unit passes to its replicas. It names the cluster's keys' secret and carries no private key;
# sensitive all the same.
output "spec" {
  value     = ha_master_cluster.this.spec
  sensitive = true
}

output "endpoint" {
  value = ha_master_cluster.this.endpoint
}
