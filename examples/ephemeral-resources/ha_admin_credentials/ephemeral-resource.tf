# A short-lived admin certificate and kubeconfig, minted on every run and never written to plan or state
# (Terraform 1.10 or later). Here a kubeconfig file is written for kubectl at the first apply of each UTC day (a
# plan later that day is empty); the file is then yours to protect and delete. examples/kubeconfig keeps it in a
# root module of its own, out of the one a drift job plans. Ephemeral values can also configure another provider (e.g. `kubernetes`).
ephemeral "ha_admin_credentials" "admin" {
  cluster  = ha_master_cluster.prod.spec
  validity = "24h"
}

resource "terraform_data" "kubeconfig" {
  depends_on       = [ha_master_replica.master]
  triggers_replace = [formatdate("YYYY-MM-DD", plantimestamp())]

  provisioner "local-exec" {
    command     = "umask 077 && printf '%s' \"$KUBECONFIG_YAML\" > admin.kubeconfig"
    environment = { KUBECONFIG_YAML = ephemeral.ha_admin_credentials.admin.kubeconfig }
  }
}

resource "ha_master_cluster" "prod" {
  name                      = "prod-master"
  zone                      = "europe-west1-b"
  etcd_client_source_ranges = ["203.0.113.0/24"]
}

resource "ha_master_replica" "master" {
  cluster = ha_master_cluster.prod.spec
}
