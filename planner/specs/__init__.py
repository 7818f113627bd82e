"""Validated inputs: model specs, hardware profiles, clusters, algorithm and workload, scenarios."""
