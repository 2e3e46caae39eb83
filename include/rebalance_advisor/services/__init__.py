"""Use cases the DAGs, the CLI and the web app call."""
