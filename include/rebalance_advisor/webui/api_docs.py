"""The API's documentation as a page of its own (``/rebalance-advisor/docs``), read from the app's
OpenAPI document: every endpoint with its parameters, body and answers, and every schema with its
fields. Server-rendered, no script and nothing from a CDN (Swagger UI loads from one)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

METHODS = ("get", "post", "put", "patch", "delete")


@dataclass(frozen=True)
class Field:
    name: str
    where: str  # "query", "path", "body field", ...
    type: str
    required: bool
    description: str


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    summary: str
    description: str
    parameters: tuple[Field, ...]
    body: str | None  # the request body's type
    responses: tuple[tuple[str, str, str | None], ...]  # (status, description, type)


@dataclass(frozen=True)
class Schema:
    name: str
    description: str
    fields: tuple[Field, ...]
    values: tuple[str, ...]  # an enum's values


@dataclass(frozen=True)
class ApiDocs:
    title: str
    description: str
    endpoints: tuple[Endpoint, ...]
    schemas: tuple[Schema, ...]


def type_text(schema: Mapping[str, Any]) -> str:
    """A JSON schema as a short type: ``PlanSummary``, ``list of string``, ``integer or null``."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " or ".join(type_text(s) for s in schema[key])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {type_text(schema.get('items') or {})}"
    return " or ".join(kind) if isinstance(kind, list) else str(kind)


def _content_type(body: Mapping[str, Any] | None) -> str | None:
    schema = ((body or {}).get("content") or {}).get("application/json", {}).get("schema")
    return type_text(schema) if schema else None


def _endpoint(path: str, method: str, op: Mapping[str, Any]) -> Endpoint:
    params = tuple(
        Field(p["name"], p.get("in", ""), type_text(p.get("schema") or {}), bool(p.get("required")),
              p.get("description") or (p.get("schema") or {}).get("description") or "")
        for p in op.get("parameters") or ()
    )  # fmt: skip
    responses = tuple(
        (code, r.get("description", ""), _content_type(r))
        for code, r in sorted((op.get("responses") or {}).items())
    )
    return Endpoint(method.upper(), path, op.get("summary", ""), op.get("description", ""), params,
                    _content_type(op.get("requestBody")), responses)  # fmt: skip


def _schema(name: str, schema: Mapping[str, Any]) -> Schema:
    required = set(schema.get("required") or ())
    fields = tuple(
        Field(field, "", type_text(s), field in required, s.get("description", ""))
        for field, s in (schema.get("properties") or {}).items()
    )
    return Schema(
        name, schema.get("description", ""), fields, tuple(str(v) for v in schema.get("enum") or ())
    )


def api_docs(spec: Mapping[str, Any]) -> ApiDocs:
    """The page's view of an OpenAPI document."""
    endpoints = tuple(
        _endpoint(path, method, item[method])
        for path, item in spec.get("paths", {}).items()
        for method in METHODS
        if method in item
    )
    schemas = tuple(_schema(n, s) for n, s in sorted(spec.get("components", {}).get("schemas", {}).items()))
    info = spec.get("info", {})
    return ApiDocs(info.get("title", ""), info.get("description", ""), endpoints, schemas)
