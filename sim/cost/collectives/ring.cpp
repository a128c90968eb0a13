// ring
