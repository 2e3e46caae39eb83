"""Which ACL a Kafka authorization error means is missing, in words an operator can act on.

The broker answers a request it refuses with an ``*_AUTHORIZATION_FAILED`` code and nothing more;
the snapshot (and whoever else meets one) turns it into the grant to add, naming the operation and
the resource. The rights each part needs are listed in the README ("Kafka connection").
"""

from __future__ import annotations

#: error code -> (operation the snapshot's request needs, resource type as kafka-acls names it)
_NEEDED = {
    "GROUP_AUTHORIZATION_FAILED": ("DESCRIBE", "Group"),
    "TOPIC_AUTHORIZATION_FAILED": ("DESCRIBE", "Topic"),
    "CLUSTER_AUTHORIZATION_FAILED": ("DESCRIBE", "Cluster"),
}


def is_authorization_error(code: str | None) -> bool:
    return bool(code) and str(code).endswith("AUTHORIZATION_FAILED")


def missing_acl(code: str | None, group_id: str | None = None, topic: str | None = None) -> str | None:
    """``"missing ACL: DESCRIBE on Group 'g' for this client's principal"``, or None for other codes."""
    if not is_authorization_error(code):
        return None
    operation, resource = _NEEDED.get(str(code), ("the needed operation", "the resource"))
    name = {"Group": group_id, "Topic": topic, "Cluster": "kafka-cluster"}.get(resource)
    on = f"{resource} {name!r}" if name else resource
    return f"missing ACL: {operation} on {on} for this client's principal"
