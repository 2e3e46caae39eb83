"""The CLI agrees with the one parameter model, field by field (the DAG forms and the web API, which
need Airflow: tests/integration/test_parameter_forms.py).

Probe values come from pydantic's own JSON schema of each model (its bounds, enums, lengths:
tests/support/parameter_probes.py); every probe must be accepted or refused alike by the model
and the CLI.
"""

from __future__ import annotations

import argparse
from typing import Any

import pytest
from rebalance_advisor.domain import parameters as P
from rebalance_advisor.errors import AdvisorError

from tests.support.parameter_probes import fields, model_accepts, probes

#: how each entry point's CLI is invoked, with what its positional arguments get
CLI = {
    P.AdvisorParams: ["advise"],
    P.SnapshotParams: ["snapshot"],
    P.ApprovalParams: ["plan-status", "approve"],
    P.StaticMemberParams: ["members", "add"],
}


def test_strategy_names_are_the_assignor_registry() -> None:
    from rebalance_advisor.domain.assignors import ASSIGNORS

    assert tuple(ASSIGNORS) == P.STRATEGY_NAMES


def test_thresholds_are_the_advisor_models_rulefields() -> None:
    from rebalance_advisor.domain.decisions import Thresholds

    assert Thresholds is P.Thresholds
    params = P.AdvisorParams(imbalance_threshold=2.0, strategies=("range",), snapshot="3")
    assert params.thresholds() == Thresholds(imbalance_threshold=2.0, strategies=("range",))
    assert set(Thresholds.model_fields) < set(P.AdvisorParams.model_fields)


@pytest.mark.parametrize(("model", "name"), list(fields("dag", "cli")))
def test_every_field_is_described_and_probed(model, name) -> None:
    assert model.model_fields[name].description
    for value, valid in probes(model, name):
        assert model_accepts(model, name, value) is valid, (value, valid)


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


@pytest.mark.parametrize(("model", "name"), list(fields("cli")))
def test_cli_agrees_with_the_model(model, name, capsys) -> None:
    from rebalance_advisor.cli import build_parser

    field = model.model_fields[name]
    cli = model.surface_of(name)["cli"]
    if cli.startswith("-"):
        args = build_parser().parse_args(_argv(model, None, None))
        default = getattr(args, name)
        assert default == field.default, (default, field.default)
    for value, valid in probes(model, name):
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


def test_the_capacity_pass_defaults_to_two_minutes_and_can_be_turned_off():
    # unset: estimates.RateParameters.capacity_pass_s, 120 s; 0: never; an hour at most
    for model in (P.AdvisorParams, P.ApprovalParams):
        extra = {"plan_id": 1} if model is P.ApprovalParams else {}
        assert P.capacity_pass_seconds(model(**extra).capacity_pass_s) == 120.0
        assert P.capacity_pass_seconds(model(capacity_pass_s=0, **extra).capacity_pass_s) == 0.0
        assert P.capacity_pass_seconds(model(capacity_pass_s=45, **extra).capacity_pass_s) == 45.0
        for bad in (-1, 3601, "soon"):
            with pytest.raises(P.ParameterError, match=r"capacity_pass_s"):
                model(capacity_pass_s=bad, **extra)


def test_the_rate_pass_is_taken_when_scheduled_unless_set():
    # unset: the scheduled service waits estimates.RateParameters.rate_pass_s (30 s) before its second
    # pass, one snapshot command takes none; set, both take it; under 5 s (no rates) refused
    assert (P.SnapshotParams().rate_pass(True), P.SnapshotParams().rate_pass(False)) == (30.0, 0.0)
    assert P.SnapshotParams(rate_pass_s=12).rate_pass(False) == 12.0
    assert P.SnapshotParams(rate_pass_s=0).rate_pass(True) == 0.0
    with pytest.raises(P.ParameterError, match=r"rate_pass_s: .*at least 5 s"):
        P.SnapshotParams(rate_pass_s=3)
