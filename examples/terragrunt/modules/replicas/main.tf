# A replica unit's module: one master per zone in `zones`, of the cluster whose `spec` the unit's dependency
# passes (../../replicas-*/terragrunt.hcl).
variable "cluster" {
  description = "The cluster unit's `spec` output, or a stand-in naming the cluster (mock_outputs) for a plan before it exists."
  type        = any
  sensitive   = true
}

variable "zones" {
  type = list(string)
}

resource "ha_master_replica" "this" {
  for_each = toset(var.zones)

  cluster = var.cluster
  zone    = each.value
}

output "replicas" {
  value = { for zone, r in ha_master_replica.this : zone => r.name }
}
