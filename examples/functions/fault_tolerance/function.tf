# How many of n etcd members may fail (Terraform 1.8, OpenTofu 1.7): 1 of 3, 2 of 5, and 0 of 2, like 1.
variable "replicas" {
  type    = number
  default = 3
}

output "members_that_may_fail" {
  value = provider::ha::fault_tolerance(var.replicas)
}
