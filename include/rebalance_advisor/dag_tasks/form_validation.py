"""Plain-words refusals for the DAG trigger forms: a JSON-schema validator Airflow picks by ``$schema``.

Airflow validates a trigger's params on the server (``jsonschema.validate``) and shows
``str(error)``: jsonschema's message followed by "Failed validating ... in schema ... On instance",
with numbers as Python prints them (``1e+16``). Airflow 3.3 has no key for a custom message, and its
form checks nothing but "required" in the browser (docs/architecture.md, "Parameters").
jsonschema picks the validator class by the schema's ``$schema``, and lets a project register one
for its own URI (:func:`jsonschema.validators.validates`). So every form field's schema names
:data:`FORM_SCHEMA_URI`, and :func:`register` (called by the DAG files through ``dag_params`` and by
the plugin in the API server) registers this module's validator for it: Draft 2020-12's keywords
and semantics, refusals in plain words ("must be at most 1,000,000 (you gave 2,000,000)") and
nothing after them. A process that has not registered it (the scheduler, which only validates
defaults) validates with jsonschema's latest draft: the same keywords, so the same verdicts.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator, ValidationError, validators

from rebalance_advisor.domain.parameters import BOUND_WORDS, bound_refusal, readable_number, readable_value

FORM_SCHEMA_URI = "urn:rebalance-advisor:form-field:1"
#: the validator's meta-schema: Draft 2020-12's, under this project's URI
META_SCHEMA = {"$schema": Draft202012Validator.META_SCHEMA["$id"], "$id": FORM_SCHEMA_URI,
               "$ref": Draft202012Validator.META_SCHEMA["$id"]}  # fmt: skip
TYPE_WORDS = {"integer": "a whole number", "number": "a number", "string": "text", "boolean": "on or off",
              "array": "a list", "object": "a JSON object", "null": "empty"}  # fmt: skip


class PlainRefusal(ValidationError):
    """A refusal whose text is its message alone (no schema or instance dump after it)."""

    def __str__(self) -> str:
        return self.message


def _listed(values: Any) -> str:
    return ", ".join(str(v) for v in values)


def _length_words(keyword: str, bound: int, instance: Any) -> str:
    unit = "character" if isinstance(instance, str) else "value"
    unit += "" if bound == 1 else "s"
    if keyword.startswith("min"):
        return "must not be empty" if bound == 1 else f"needs at least {readable_number(bound)} {unit}"
    return f"takes at most {readable_number(bound)} {unit} (you gave {readable_number(len(instance))})"


def refusal_words(keyword: str, value: Any, instance: Any, schema: dict[str, Any]) -> str | None:
    """What is wrong, in words, for a value that breaks ``keyword``; None: jsonschema's own words."""
    said = (schema.get("errorMessage") or {}).get(keyword)
    if said:
        return said
    if keyword in BOUND_WORDS:
        return bound_refusal(keyword, value, instance)
    if keyword == "type":
        kinds = [value] if isinstance(value, str) else [k for k in value if k != "null"] or ["null"]
        return f"must be {' or '.join(TYPE_WORDS.get(k, k) for k in kinds)} (you gave {readable_value(instance)})"
    if keyword == "enum":
        return f"must be one of: {_listed(value)} (you gave {readable_value(instance)})"
    if keyword in ("minLength", "maxLength", "minItems", "maxItems"):
        return _length_words(keyword, value, instance)
    if keyword == "uniqueItems":
        return "names a value more than once: give each value at most once"
    if keyword == "not" and value == {"type": "null"}:
        return "is required"
    if keyword == "pattern":
        return (
            f"does not have the form the field's description asks for (you gave {readable_value(instance)})"
        )
    return None


def _plain(keyword: str, check: Any):
    """``check`` (a Draft 2020-12 keyword function) with its own refusals said in plain words;
    refusals from deeper schemas (``allOf``, ``items``) are already plain and pass as they are."""

    def plain_check(validator: Any, value: Any, instance: Any, schema: dict[str, Any]):
        for error in check(validator, value, instance, schema) or ():
            if isinstance(error, PlainRefusal):
                yield error
                continue
            words = refusal_words(keyword, value, instance, schema)
            yield PlainRefusal(words or error.message, context=error.context, cause=error.cause)

    return plain_check


FormValidator = validators.create(
    meta_schema=META_SCHEMA,
    validators={k: _plain(k, fn) for k, fn in Draft202012Validator.VALIDATORS.items()},
    type_checker=Draft202012Validator.TYPE_CHECKER,
    format_checker=Draft202012Validator.FORMAT_CHECKER,
)


def register() -> None:
    """Make ``jsonschema.validate`` use :data:`FormValidator` for schemas naming :data:`FORM_SCHEMA_URI`
    (idempotent; jsonschema keeps the registry per process)."""
    validators.validates(FORM_SCHEMA_URI)(FormValidator)
