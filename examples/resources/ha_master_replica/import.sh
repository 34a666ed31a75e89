# The id is <project>/<zone>/<name>; the VM carries the label ha-master-cluster=<cluster>.
terraform import 'ha_master_replica.master["europe-west1-b"]' my-project/europe-west1-b/prod-master-abc
