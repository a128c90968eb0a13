// cmd_profile
