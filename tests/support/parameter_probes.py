"""Probes of the parameter models: (value, valid) pairs from pydantic's own JSON schema of each
model (its bounds, enums, lengths), shared by the unit test of the CLI
(tests/unit/test_parameters.py) and the DAG-form and API test (tests/integration/test_parameter_forms.py)."""

from __future__ import annotations

from typing import Any

import pytest
from rebalance_advisor.domain import parameters as P
from rebalance_advisor.errors import AdvisorError

#: a valid value for each required field, so that one field at a time can be probed
REQUIRED = {"plan_id": 7, "group_id": "orders", "member_id": "w-0"}


def schema(model: type[P.ParamModel], name: str) -> dict[str, Any]:
    """The field's JSON schema, its non-null ``anyOf`` option folded in."""
    found = dict(model.model_json_schema()["properties"][name])
    for option in found.pop("anyOf", []):
        if option.get("type") != "null":
            found.update(option)
    return found


def probes(model: type[P.ParamModel], name: str) -> list[tuple[Any, bool]]:
    """(value, valid) pairs, from the schema's own keywords (not from the code under test)."""
    s = schema(model, name)
    kind = s.get("type")
    out: list[tuple[Any, bool]] = []
    if kind in ("number", "integer"):
        step = 1 if kind == "integer" else 0.5
        if "minimum" in s:
            out += [(s["minimum"], True), (s["minimum"] - step, False), (-1, s["minimum"] <= -1)]
        if "exclusiveMinimum" in s:
            out += [(s["exclusiveMinimum"], False), (s["exclusiveMinimum"] + step, True)]
        if "maximum" in s:
            out += [(s["maximum"], True), (s["maximum"] + step, False)]
        if "exclusiveMaximum" in s:
            out += [(s["exclusiveMaximum"], False), (s["exclusiveMaximum"] - step / 10, True)]
    if "enum" in s:
        out += [(v, True) for v in s["enum"]] + [("not-a-choice", False)]
    if kind == "string":
        if s.get("minLength"):
            out.append(("", False))
        if "maxLength" in s:
            # A structured value (one with examples) is probed with its example, not with free text.
            longest_valid = s["examples"][0] if "examples" in s else "x" * s["maxLength"]
            out += [(longest_valid, True), ("x" * (s["maxLength"] + 1), False)]
        if "pattern" in s and name in REQUIRED:
            out.append((" padded ", False))
    if kind == "array":
        items = s["items"]
        for v in items.get("enum", []):
            out.append(([v], True))
        if "enum" in items:
            out.append((["not-a-choice"], False))
        if "pattern" in items:
            out += [(["ok-name"], True), (["has space"], False)]
        if s.get("minItems"):
            out.append(([], False))
        if s.get("uniqueItems") and "enum" in items:
            out.append(([items["enum"][0]] * 2, False))
    if s.get("format") == "regex":
        # RE2 refuses look-around: the form's pattern refuses it before a run exists, like the model
        out += [("kip-.*", True), ("kip-(", False), ("(?!test-).*", False), ("(a)\\1", False)]
    if name == "reset_policy":  # a grammar the form's pattern states: [REGEX=]VALUE, comma-separated
        out += [("orders-.*=earliest, LATEST", True), ("orders-.*=sometimes", False), ("bogus", False)]
    if name == "member_capacity":  # [MEMBER_REGEX@]GROUP_REGEX=RATE, comma-separated, RATE > 0
        out += [("big-.*@orders-.*=2_000, orders-.*=.5,", True), ("a=b@c=1e3", True), ("orders-.*", False),
                ("orders=0", False), ("orders=-5", False), ("@orders=5", False), (" @=5", False),
                ("orders=five", False), ("orders=0.0e7", False)]  # fmt: skip
    return out


def model_accepts(model: type[P.ParamModel], name: str, value: Any) -> bool:
    data = {k: v for k, v in REQUIRED.items() if k in model.model_fields}
    try:
        model.parse({**data, name: value})
    except AdvisorError:
        return False
    return True


def fields(*surfaces: str):
    for model in P.MODELS.values():
        for name in model.model_fields:
            where = model.surface_of(name)
            if ("dag" in surfaces and where.get("dag", True)) or ("cli" in surfaces and where.get("cli")):
                yield pytest.param(model, name, id=f"{model.__name__}.{name}")
