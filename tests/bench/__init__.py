"""The benchmark suite: its pure parts (table tests) and the smoke profile on a cluster."""
