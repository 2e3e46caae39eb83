"""The trigger forms' refusals in plain words: what Airflow's server shows after "Invalid input for
param X:" (it calls ``jsonschema.validate`` on each field's schema and prints the error), and the
CLI's words for the same bounds. Expected texts written by hand. Airflow-free: the schemas are
what ``dag_params`` hands to ``Param`` (tests/integration/test_parameter_forms.py checks them there)."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from rebalance_advisor.dag_tasks import form_validation
from rebalance_advisor.dag_tasks.forms import form_schema, param_spec
from rebalance_advisor.domain import parameters as P

from tests.support.parameter_probes import fields, probes


def _refusal(model: type[P.ParamModel], name: str, value: Any) -> str:
    """What Airflow's server says about ``value`` for this field (the part after its prefix)."""
    form_validation.register()
    schema = param_spec(model, name)[2]
    with pytest.raises(jsonschema.ValidationError) as refused:
        jsonschema.validate(value, schema, format_checker=jsonschema.FormatChecker())
    return str(refused.value)


@pytest.mark.parametrize(
    ("model", "name", "value", "said"),
    [
        (P.AdvisorParams, "lag_floor", 10**16,
         "must be at most 1,000,000,000,000,000 (you gave 10,000,000,000,000,000)"),
        (P.AdvisorParams, "lag_floor", 1e21,
         "must be at most 1,000,000,000,000,000 (you gave 1,000,000,000,000,000,000,000)"),
        (P.AdvisorParams, "min_improvement", 1, "must be below 1 (you gave 1)"),
        (P.AdvisorParams, "horizon_s", 0, "must be above 0 (you gave 0)"),
        (P.AdvisorParams, "imbalance_threshold", 0.5, "must be at least 1 (you gave 0.5)"),
        (P.AdvisorParams, "lag_floor", "many", "must be a whole number (you gave 'many')"),
        (P.AdvisorParams, "move_budget", "all", "must be a whole number (you gave 'all')"),
        (P.AdvisorParams, "strategies", [], "must not be empty"),
        (P.AdvisorParams, "strategies", ["range", "range"],
         "names a value more than once: give each value at most once"),
        (P.AdvisorParams, "snapshot", "newest", "write 'latest' or a snapshot id (digits only)"),
        (P.ApprovalParams, "plan_id", None, "is required"),
        (P.ApprovalParams, "plan_id", 0, "must be at least 1 (you gave 0)"),
        (P.ApprovalParams, "plan_id", 2**63,
         "must be at most 9,223,372,036,854,775,807 (you gave 9,223,372,036,854,775,808)"),
        (P.ApprovalParams, "decision", "maybe", "must be one of: ask, approve, reject (you gave 'maybe')"),
        (P.ApprovalParams, "note", "x" * 2001, "takes at most 2,000 characters (you gave 2,001)"),
        (P.StaticMemberParams, "group_id", " orders", "must not start or end with a space"),
        (P.StaticMemberParams, "topics", ["has space"],
         "a topic name has 1 to 249 letters, digits, '.', '_' or '-'"),
    ],
)  # fmt: skip
def test_a_refused_value_reads_as_one_plain_line(model, name, value, said) -> None:
    assert _refusal(model, name, value) == said


def test_regex_fields_say_why_in_words() -> None:
    # empty breaks two keywords of an id; either refusal reads plainly
    assert _refusal(P.StaticMemberParams, "group_id", "") in (
        "must not be empty",
        "must not start or end with a space",
    )
    said = _refusal(P.AdvisorParams, "group_regex", "(?!test-).*")
    assert said.startswith("uses look-around") and "RE2" in said and "\n" not in said
    assert _refusal(P.AdvisorParams, "group_regex", "kip-(").startswith("is not a regular expression")
    said = _refusal(P.AdvisorParams, "reset_policy", "orders-.*=sometimes")
    assert said.startswith("write comma-separated [GROUP_REGEX=]VALUE items") and "by_duration" in said
    said = _refusal(P.AdvisorParams, "strategies", ["no_such_strategy"])
    assert (
        said.startswith("must be one of: range, roundrobin, sticky,")
        and "(you gave 'no_such_strategy')" in said
    )


@pytest.mark.parametrize(("model", "name"), list(fields("dag")))
def test_the_verdicts_are_draft_2020_12s(model, name) -> None:
    """A process that has not registered the validator (the scheduler) validates with jsonschema's
    latest draft: it must accept and refuse exactly what the registered one does."""
    schema = form_schema(model, name)
    checker = jsonschema.FormatChecker()  # what Airflow passes
    plain = form_validation.FormValidator(schema, format_checker=checker)
    draft = jsonschema.Draft202012Validator(schema, format_checker=checker)
    for value, _ in probes(model, name):
        assert plain.is_valid(value) is draft.is_valid(value), value
    assert schema["$schema"] == form_validation.FORM_SCHEMA_URI


def test_the_cli_says_bounds_in_the_same_words() -> None:
    with pytest.raises(P.ParameterError) as refused:
        P.AdvisorParams.parse({"lag_floor": 10**16})
    assert str(refused.value) == (
        "invalid parameters: lag_floor: must be at most 1,000,000,000,000,000 (you gave 10,000,000,000,000,000)"
    )
