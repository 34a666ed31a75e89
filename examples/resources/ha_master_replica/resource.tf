resource "ha_master_cluster" "prod" {
  name                      = "prod-master"
  zone                      = "europe-west1-b"
  multizone                 = true
  etcd_client_source_ranges = ["203.0.113.0/24"]
}

# One master per zone: an etcd member, an API server and leader-elected controllers. Three tolerate the loss of
# one; the second replica puts the static IP behind a load balancer.
resource "ha_master_replica" "master" {
  for_each = toset(["europe-west1-b", "europe-west1-c", "europe-west1-d"])

  cluster = ha_master_cluster.prod.spec
  zone    = each.value
}
