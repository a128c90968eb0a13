// cmd_cluster
