# The cluster: static IP, firewall rules, CAs and the settings every master shares. Apply it before the replica
# units; a change here that masters are built from (machine type, image, versions...) rolls every master, and
# this unit's plan says how many, though the replica units' plans show it only after this unit is applied.
include "root" {
  path = find_in_parent_folders("root.hcl")
}

terraform {
  source = "../modules//cluster"
}

inputs = {
  name                      = "prod-master"
  zone                      = "europe-west1-b"
  machine_type              = "e2-standard-2"
  etcd_client_source_ranges = ["127.0.0.0/8"]
  deletion_protection       = true
}
