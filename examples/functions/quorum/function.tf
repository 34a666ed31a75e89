# How many of n etcd members must be up for the control plane to work (Terraform 1.8, OpenTofu 1.7): 2 of 3.
variable "replicas" {
  type    = number
  default = 3
}

output "members_needed" {
  value = provider::ha::quorum(var.replicas)
}
