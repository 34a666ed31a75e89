# Replicas of ../cluster in zone europe-west1-c, in a state of their own: replica units may be applied at the
# same time; the provider processes take turns on the cluster's lock.
include "root" {
  path = find_in_parent_folders("root.hcl")
}

terraform {
  source = "../modules//replicas"
}

dependency "cluster" {
  config_path = "../cluster"

  # Before the cluster exists, `run --all plan` plans this unit with a stand-in for its spec: the cluster's
  # identity is all it needs to spell. The plan warns that it cannot be applied, and an apply refuses it.
  mock_outputs = {
    spec = {
      name    = "prod-master"
      project = "ha-sim"
      region  = "europe-west1"
      zone    = "europe-west1-b"
    }
  }
  mock_outputs_allowed_terraform_commands = ["init", "validate", "plan"]
}

inputs = {
  cluster = dependency.cluster.outputs.spec
  zones   = ["europe-west1-c"]
}
