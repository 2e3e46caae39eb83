"""Which ACL a Kafka authorization error means is missing, for the snapshot's requests.

The broker answers a request it refuses with an ``*_AUTHORIZATION_FAILED`` code and nothing more;
the snapshot turns it into the grant to add. The wording is the client package's
(``rebalance_advisor_client.access``), shared with the publisher and the client helper. The rights
each part needs are listed in docs/operations/security.md ("Least rights per part").
"""

from __future__ import annotations

from rebalance_advisor_client.access import Grant, is_authorization_code, missing_grant

#: error code -> (operation the snapshot's request needs, resource type as kafka-acls names it)
_NEEDED = {
    "GROUP_AUTHORIZATION_FAILED": ("DESCRIBE", "Group"),
    "TOPIC_AUTHORIZATION_FAILED": ("DESCRIBE", "Topic"),
    "CLUSTER_AUTHORIZATION_FAILED": ("DESCRIBE", "Cluster"),
}


def is_authorization_error(code: str | None) -> bool:
    return is_authorization_code(code)


def missing_acl(code: str | None, group_id: str | None = None, topic: str | None = None) -> str | None:
    """``"missing ACL: DESCRIBE on Group 'g' for this client's principal"``, or None for other codes."""
    if not is_authorization_error(code):
        return None
    operation, resource = _NEEDED.get(str(code), ("the needed operation", "the resource"))
    if resource == "Topic" and not topic:
        # ConsumerGroupDescribe refuses a whole KIP-848 group this way and does not name the topic
        resource = "Topic (every topic the group's members subscribe to; the broker does not name them)"
    name = {"Group": group_id, "Topic": topic, "Cluster": "kafka-cluster"}.get(resource)
    return missing_grant(Grant(operation, resource, name))
