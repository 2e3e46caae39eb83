"""The DAG forms, the CLI and the web API agree with the one parameter model, field by field.

Probe values come from pydantic's own JSON schema of each model (its bounds, enums, lengths); every
probe must be accepted or refused alike by the model, the DAG's ``Param`` and the CLI.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
from rebalance_advisor.domain import parameters as P
from rebalance_advisor.errors import AdvisorError

DAGS = Path(__file__).resolve().parents[2] / "dags"
#: a valid value for each required field, so that one field at a time can be probed
REQUIRED = {"plan_id": 7, "group_id": "orders", "member_id": "w-0"}
#: how each entry point's CLI is invoked, with what its positional arguments get
CLI = {
    P.AdvisorParams: ["advise"],
    P.SnapshotParams: ["snapshot"],
    P.ApprovalParams: ["plan-status", "approve"],
    P.StaticMemberParams: ["members", "add"],
}


def _schema(model: type[P.ParamModel], name: str) -> dict[str, Any]:
    schema = dict(model.model_json_schema()["properties"][name])
    for option in schema.pop("anyOf", []):
        if option.get("type") != "null":
            schema.update(option)
    return schema


def _probes(model: type[P.ParamModel], name: str) -> list[tuple[Any, bool]]:
    """(value, valid) pairs, from the schema's own keywords (not from the code under test)."""
    s = _schema(model, name)
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
    return out


def _model_accepts(model: type[P.ParamModel], name: str, value: Any) -> bool:
    data = {k: v for k, v in REQUIRED.items() if k in model.model_fields}
    try:
        model.parse({**data, name: value})
    except AdvisorError:
        return False
    return True


def _fields(*surfaces: str):
    for model in P.MODELS.values():
        for name in model.model_fields:
            where = model.surface_of(name)
            if ("dag" in surfaces and where.get("dag", True)) or ("cli" in surfaces and where.get("cli")):
                yield pytest.param(model, name, id=f"{model.__name__}.{name}")


def test_strategy_names_are_the_assignor_registry() -> None:
    from rebalance_advisor.domain.assignors import ASSIGNORS

    assert tuple(ASSIGNORS) == P.STRATEGY_NAMES


def test_thresholds_are_the_advisor_models_rule_fields() -> None:
    from rebalance_advisor.domain.decisions import Thresholds

    assert Thresholds is P.Thresholds
    params = P.AdvisorParams(imbalance_threshold=2.0, strategies=("range",), snapshot="3")
    assert params.thresholds() == Thresholds(imbalance_threshold=2.0, strategies=("range",))
    assert set(Thresholds.model_fields) < set(P.AdvisorParams.model_fields)


@pytest.mark.parametrize(("model", "name"), list(_fields("dag", "cli")))
def test_every_field_is_described_and_probed(model, name) -> None:
    assert model.model_fields[name].description
    for value, valid in _probes(model, name):
        assert _model_accepts(model, name, value) is valid, (value, valid)


@pytest.fixture(scope="module")
def dags(airflow_home) -> dict[str, Any]:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    assert not bag.import_errors, bag.import_errors
    return bag.dags


@pytest.mark.airflow
@pytest.mark.parametrize(("model", "name"), list(_fields("dag")))
def test_dag_form_agrees_with_the_model(dags, model, name) -> None:
    from airflow.sdk.definitions.param import ParamValidationError

    (dag_id,) = [d for d, m in P.MODELS.items() if m is model]
    param = dags[dag_id].params.get_param(name)
    field = model.model_fields[name]
    if field.is_required():
        assert not param.has_value
    else:
        default = field.default
        assert param.value == (list(default) if isinstance(default, tuple) else default)
    assert field.description in param.description
    # bounds stay out of the top level: Airflow's number input clamps to them (-1 became 1)
    assert not {"minimum", "maximum"} & set(param.schema)
    for value, valid in _probes(model, name):
        try:
            param.resolve(value)
            accepted = True
        except ParamValidationError:
            accepted = False
        assert accepted is valid, (value, valid)
    assert set(dags[dag_id].params.keys()) == {n for n in model.model_fields if model.surface_of(n)["dag"]}


def _argv(model: type[P.ParamModel], name: str | None, value: Any) -> list[str]:
    argv = list(CLI[model])
    positional = {"plan_id": "7", "group_id": "orders", "member_id": "w-0", "topics": ["in"]}
    for field_name, text in positional.items():
        if field_name not in model.model_fields:
            continue
        if field_name == name:
            text = [str(v) for v in value] if isinstance(value, list) else str(value)
        argv += text if isinstance(text, list) else [text]
    if name is not None and model.surface_of(name)["cli"].startswith("-"):
        text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
        argv += [model.surface_of(name)["cli"], text]
    return argv


def _cli_accepts(argv: list[str], model: type[P.ParamModel]) -> bool:
    from rebalance_advisor.cli import build_parser
    from rebalance_advisor.cli.options import params_from

    try:
        args = build_parser().parse_args(argv)
        params_from(args, model)
    except (SystemExit, AdvisorError):
        return False
    return True


@pytest.mark.parametrize(("model", "name"), list(_fields("cli")))
def test_cli_agrees_with_the_model(model, name, capsys) -> None:
    from rebalance_advisor.cli import build_parser

    field = model.model_fields[name]
    cli = model.surface_of(name)["cli"]
    if cli.startswith("-"):
        args = build_parser().parse_args(_argv(model, None, None))
        default = getattr(args, name)
        assert default == field.default, (default, field.default)
    for value, valid in _probes(model, name):
        if value == [] and not cli.startswith("-"):
            continue  # an empty positional list cannot be typed
        assert _cli_accepts(_argv(model, name, value), model) is valid, (value, valid)
    capsys.readouterr()


def test_cli_switches_and_help_name_the_defaults(capsys) -> None:
    from rebalance_advisor.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["advise", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name in ("imbalance_threshold", "lag_floor", "min_improvement", "cooldown_minutes", "target_catch_up_s",
                 "horizon_s", "handover_cost_s", "hysteresis_window_s"):  # fmt: skip
        assert f"(default {P.AdvisorParams.model_fields[name].default:g})" in text
    # argparse may wrap inside the long default: compare without any whitespace
    assert (
        "(defaultrange,roundrobin,sticky,lag_aware,lag_aware_sticky,rate_aware,rate_aware_sticky)"
        in "".join(text.split())
    )
    args = build_parser().parse_args(["advise", "--move-budget", "unlimited", "--dry-run"])
    assert (args.move_budget, args.dry_run) == (None, True)
    assert isinstance(build_parser().parse_args(["advise"]), argparse.Namespace)


def test_api_validation_agrees_with_the_model() -> None:
    from fastapi.params import Path as PathParam
    from pydantic import ValidationError
    from rebalance_advisor.webui import api
    from rebalance_advisor.webui.schemas import DecisionBody, Strategy

    assert tuple(Strategy) == P.STRATEGY_NAMES
    for value, valid in _probes(P.ApprovalParams, "note"):
        try:
            DecisionBody(note=value)
            accepted = True
        except ValidationError:
            accepted = False
        assert accepted is valid
    (path,) = [m for m in api.PlanId.__metadata__ if isinstance(m, PathParam)]
    ge = [getattr(m, "ge", None) for m in path.metadata if getattr(m, "ge", None) is not None]
    assert ge == [_schema(P.ApprovalParams, "plan_id")["minimum"]]
