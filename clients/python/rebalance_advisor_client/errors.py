"""The helper's own error types (the package does not depend on the advisor)."""

from __future__ import annotations


class ClientError(Exception):
    """Bad configuration or an unusable cluster: the message says what is wrong and what to do."""


class TransactionsUnavailable(ClientError):
    """Fenced mode cannot start: the cluster refuses or lacks transactions."""


class AccessRefused(ClientError):
    """The broker's ACLs refuse this member a request: the message names the missing grant."""
