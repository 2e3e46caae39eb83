"""Publishing plans: static assignments on a compacted Kafka topic and the handover rules.

Modules (imported on demand, so importing this package stays cheap for DAG parsing):

- ``assignment_topic``: the topic, its record format, reading it back
- ``handover``: the pure ownership rules the client helper follows
- ``publisher``: writes one plan's per-member assignments in one transaction
"""
