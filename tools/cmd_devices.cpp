// cmd_devices
