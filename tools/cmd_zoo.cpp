// cmd_zoo
