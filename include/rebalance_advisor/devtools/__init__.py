"""Local broker and demo workload: dev tooling, not shipped logic."""
