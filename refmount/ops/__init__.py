"""Running on a host: log output, systemd notifications, kernel and allocator tuning."""
