"""ACL bindings for the secured-cluster tests: one way to grant a right to a test user."""

from __future__ import annotations

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)


def allow(kind: str, name: str, operation: str, user: str, prefixed: bool = True) -> AclBinding:
    """ALLOW ``operation`` on resource ``kind`` ``name`` (a prefix unless ``prefixed`` is False) for ``user``."""
    pattern = ResourcePatternType.PREFIXED if prefixed else ResourcePatternType.LITERAL
    return AclBinding(
        getattr(ResourceType, kind), name, pattern, f"User:{user}", "*", getattr(AclOperation, operation),
        AclPermissionType.ALLOW,
    )  # fmt: skip
