# For clients without ephemeral resources (OpenTofu before 1.11): the certificate and its key are stored in
# state, so keep the validity short and the state protected.
data "ha_admin_credentials" "admin" {
  cluster  = ha_master_cluster.prod.spec
  validity = "1h"
}

output "kubeconfig" {
  value     = data.ha_admin_credentials.admin.kubeconfig
  sensitive = true
}

resource "ha_master_cluster" "prod" {
  name                      = "prod-master"
  zone                      = "europe-west1-b"
  etcd_client_source_ranges = ["203.0.113.0/24"]
}
