"""Adapters at the edges: Kafka, Spark, Airflow connections."""

import logging

#: where every librdkafka client of the server logs (passed as ``logger=``): to whatever logging is
#: configured (Airflow's task log, pytest), never bare to a terminal through logging's last resort,
#: where a CLI prints its one error line; without a logger librdkafka writes to stderr itself
LIBRDKAFKA_LOG = logging.getLogger("rebalance_advisor.librdkafka")
LIBRDKAFKA_LOG.addHandler(logging.NullHandler())
