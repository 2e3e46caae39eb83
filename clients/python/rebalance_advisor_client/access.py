"""The words for a Kafka ACL refusal: which grant is missing, said so an operator can add it.

A broker refuses a request with an ``*_AUTHORIZATION_FAILED`` code and nothing more; only the caller
knows which operation on which resource the request needed. Both the client helper and the server
(publisher, snapshot) phrase the missing grant here, so every refusal reads the same. docs/operations/security.md,
"Least rights per part", lists the grants of each part.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError


@dataclass(frozen=True)
class Grant:
    """One ACL: ``operation`` (kafka-acls' name, e.g. READ) on a resource of ``resource_type``."""

    operation: str
    resource_type: str  # Topic, Group, TransactionalId, Cluster (as kafka-acls prints them)
    name: str | None = None
    prefixed: bool = False

    def __str__(self) -> str:
        if self.name is None:
            return f"{self.operation} on {self.resource_type}"
        kind = " prefix" if self.prefixed else ""
        return f"{self.operation} on {self.resource_type}{kind} {self.name!r}"


def is_authorization_code(code: Any) -> bool:
    """True for a refusal by the broker's authorizer (a code name or a ``KafkaError``)."""
    if isinstance(code, KafkaError):
        code = code.name()
    return bool(code) and str(code).endswith("AUTHORIZATION_FAILED")


def missing_grant(*grants: Grant | str) -> str:
    """``"missing ACL: READ on Topic 't' for this client's principal"`` (several joined by "and")."""
    return f"missing ACL: {' and '.join(map(str, grants))} for this client's principal"


def error_code(error: BaseException | KafkaError | None) -> str | None:
    """The code name of a KafkaError, or of the KafkaError a KafkaException carries; else None."""
    if isinstance(error, KafkaError):
        return error.name()
    first = error.args[0] if error is not None and error.args else None
    return first.name() if isinstance(first, KafkaError) else None


def refusal(error: BaseException | KafkaError | None, *grants: Grant | str) -> str | None:
    """``missing_grant(grants)`` when ``error`` is an authorization refusal, else None."""
    return missing_grant(*grants) if is_authorization_code(error_code(error)) else None
