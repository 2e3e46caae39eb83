"""rebalance-advisor: lag-aware assignment plans for Kafka consumer groups."""

__version__ = "0.1.0"
