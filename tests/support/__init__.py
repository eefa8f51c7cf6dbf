"""Helpers shared by the tests, the soak and the benchmark: servers, data sets, real mounts."""
