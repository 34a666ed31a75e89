# What every master of the cluster shares: the static IP, firewall rules, CAs and what a master is made of.
# Changing what a master is made of (machine type, image, versions) rolls the replicas one at a time.
resource "ha_master_cluster" "prod" {
  name               = "prod-master"
  zone               = "europe-west1-b"
  multizone          = true
  machine_type       = "e2-standard-4"
  kubernetes_version = "1.35.0"
  etcd_version       = "3.5"

  # Where Terraform runs: the provider manages etcd membership through etcd's client port.
  etcd_client_source_ranges = ["203.0.113.0/24"]

  labels = { team = "platform" }

  # A checked etcd snapshot in Cloud Storage before every change that touches etcd; the newest 10 are kept.
  backup {
    bucket = "my-project-etcd-backups"
    prefix = "clusters"
  }
}
