"""Adapters at the edges: Kafka, Spark, Airflow connections."""
