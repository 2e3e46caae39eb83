"""Task bodies of the DAG files."""
