"""The DAG trigger forms, generated from the parameter models (:mod:`rebalance_advisor.domain.parameters`).

Imported by the DAG files at parse time: Airflow's ``Param``, jsonschema and pydantic only.

Choices made for Airflow's form (docs/architecture.md, "Parameters"):
- Number bounds go under ``allOf`` instead of top-level ``minimum``/``maximum``. The form's number
  input clamps to a top-level bound when the field loses focus, so ``-1`` typed into a field with
  minimum 1 silently became ``1``; under ``allOf`` the value is kept and Airflow's validation
  refuses it with the reason (HTTP 400, no run created).
- A list of known values gets ``examples`` (the form then shows a multi-select).
- The form marks a field required when its type does not admit null, and a required field whose
  value is null is red ("This field is required") as soon as the form opens. So a toggle admits
  null (a toggle always has a value; the model reads null as its default), and a required text
  field opens empty (``""``) rather than null: refused at submit if still empty, not at open.
  A required field of another type (the approval's ``plan_id``) admits null in its type too, and
  refuses it with ``not: {type: null}``, which the form does not read: it opens clean and is
  refused at submit ("is required").
- Bounds are stated in the field's description in plain words with whole numbers written out
  ("at least 0, at most 1,000,000"), never ``1e+06``.
- Every field's schema names the project's validator (``$schema``,
  :mod:`rebalance_advisor.dag_tasks.form_validation`): a refused value comes back in one line, in
  the same words, not as jsonschema's dump.
"""

from __future__ import annotations

from typing import Any

from rebalance_advisor.dag_tasks import form_validation
from rebalance_advisor.domain.parameters import BOUND_WORDS, ParamModel, readable_number

BOUND_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def bounds_text(bounds: dict[str, float]) -> str:
    """The allowed range in plain words, lower bound first."""
    order = ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")
    return ", ".join(f"{BOUND_WORDS[k]} {readable_number(bounds[k])}" for k in order if k in bounds)


def _merge_nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """pydantic's ``anyOf: [X, {type: null}]`` as ``X`` with ``type: [null, X.type]`` (what the form reads)."""
    options = schema.pop("anyOf", None)
    if not options:
        return schema
    other = [o for o in options if o.get("type") != "null"]
    if len(other) != 1 or len(other) == len(options):
        raise TypeError(f"unsupported parameter schema: {options}")
    merged = {**other[0], **schema}
    merged["type"] = ["null", other[0]["type"]]
    return merged


def form_schema(model: type[ParamModel], name: str) -> dict[str, Any]:
    """The JSON schema of one field as the DAG's ``Param`` gets it (without its default)."""
    schema = dict(model.model_json_schema()["properties"][name])
    for key in ("title", "default"):
        schema.pop(key, None)
    section = schema.get("x-section")
    schema = {k: v for k, v in schema.items() if not k.startswith("x-")}
    schema = _merge_nullable(schema)
    bounds = {k: schema.pop(k) for k in BOUND_KEYWORDS if k in schema}
    if bounds:
        schema["allOf"] = [bounds]
        schema["description"] = f"{schema.get('description', '')} (allowed: {bounds_text(bounds)})".strip()
    if schema.get("type") == "boolean":
        schema["type"] = ["boolean", "null"]  # a toggle is never "required" (module docstring)
    if section:
        schema["section"] = section
    schema["$schema"] = form_validation.FORM_SCHEMA_URI
    return schema


def param_spec(model: type[ParamModel], name: str) -> tuple[Any, str | None, dict[str, Any]]:
    """(the value the form opens with, the description, the schema) of one field: what its ``Param``
    gets (Airflow-free, so the unit tests read it without loading Airflow)."""
    field = model.model_fields[name]
    schema = form_schema(model, name)
    description = schema.pop("description", None)
    if field.is_required() and schema.get("type") == "string":
        return "", description, schema  # opens empty, not red
    if field.is_required():  # admits null (opens clean), refused at submit: module docstring
        said = f"required: {description}"  # the form shows no asterisk for a type that admits null
        return None, said, {**schema, "type": ["null", schema["type"]], "not": {"type": "null"}}
    default = field.default
    return (list(default) if isinstance(default, tuple) else default), description, schema


def dag_params(model: type[ParamModel]) -> dict[str, Any]:
    """Every field the DAG form shows, as ``Param`` with the model's default, type and bounds."""
    from airflow.sdk import Param

    form_validation.register()  # this process validates the forms in plain words too
    params: dict[str, Any] = {}
    for name in model.model_fields:
        if model.surface_of(name).get("dag", True):
            value, description, schema = param_spec(model, name)
            params[name] = Param(value, description=description, **schema)
    return params
