# The cluster's health at every plan: the check block warns with the verdict when it is unhealthy.
# No depends_on: with one, a plan in which a replica changes would defer the read to apply.
data "ha_cluster_health" "prod" {
  cluster = ha_master_cluster.prod.spec
}

check "control_plane" {
  assert {
    condition     = data.ha_cluster_health.prod.healthy
    error_message = data.ha_cluster_health.prod.verdict
  }
}

output "verdict" {
  value = data.ha_cluster_health.prod.verdict
}

resource "ha_master_cluster" "prod" {
  name                      = "prod-master"
  zone                      = "europe-west1-b"
  etcd_client_source_ranges = ["203.0.113.0/24"]
}
