# `terraform query` (Terraform >= 1.14) lists the masters of a cluster; `-generate-config-out=found.tf` writes
# import blocks for them.
list "ha_master_replica" "masters" {
  provider = ha
  config {
    cluster = "prod-master"
  }
}
