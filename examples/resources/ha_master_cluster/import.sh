# The id is <project>/<region>/<name>.
terraform import ha_master_cluster.prod my-project/europe-west1/prod-master
