"""How the platform runs for real: its services, and a local cluster of them (scripts/cluster)."""
