"""The DAG forms and the web API agree with the one parameter model, field by field: every probe
(tests/support/parameter_probes.py) is accepted or refused alike by the model, the DAG's
``Param`` and the API's validation; defaults, descriptions and the form's fields are the model's.
Both load Airflow, so both take the session's ``airflow_home`` (its metadata database)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rebalance_advisor.domain import parameters as P

from tests.support.parameter_probes import REQUIRED, fields, probes, schema


def _required_of(model: type[P.ParamModel]) -> dict[str, Any]:
    return {k: v for k, v in REQUIRED.items() if k in model.model_fields}


DAGS = Path(__file__).resolve().parents[2] / "dags"


@pytest.fixture(scope="module")
def dags(airflow_home) -> dict[str, Any]:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    assert not bag.import_errors, bag.import_errors
    return bag.dags


@pytest.mark.airflow
@pytest.mark.parametrize(("model", "name"), list(fields("dag")))
def test_dag_form_agrees_with_the_model(dags, model, name) -> None:
    from airflow.sdk.definitions.param import ParamValidationError

    (dag_id,) = [d for d, m in P.MODELS.items() if m is model]
    param = dags[dag_id].params.get_param(name)
    field = model.model_fields[name]
    if field.is_required():  # a text field opens empty, not null: no red "required" at open
        assert param.value == "" if "string" in str(param.schema.get("type")) else not param.has_value
    else:
        default = field.default
        assert param.value == (list(default) if isinstance(default, tuple) else default)
    assert field.description in param.description
    # bounds stay out of the top level: Airflow's number input clamps to them (-1 became 1)
    assert not {"minimum", "maximum"} & set(param.schema)
    # bounds in plain words with the digits written out; a toggle is never marked required (its
    # type admits null, which the model reads as its default)
    assert "e+" not in param.description and "minimum" not in param.description
    if field.annotation is bool:
        assert "null" in param.schema["type"] and model.parse({**_required_of(model), name: None})
    if field.is_required() and "string" not in str(param.schema.get("type")):
        # opens clean (its type admits null, so the form does not mark it red), refused at submit
        assert "null" in param.schema["type"]
        with pytest.raises(ParamValidationError, match=r"^is required$"):
            param.resolve(None)
    for value, valid in probes(model, name):
        try:
            param.resolve(value)
            accepted = True
        except ParamValidationError as error:
            accepted, said = False, str(error)
            # one line in plain words (form_validation), not jsonschema's dump of schema and value
            assert "\n" not in said and "Failed validating" not in said and "e+" not in said, said
        assert accepted is valid, (value, valid)
    assert set(dags[dag_id].params.keys()) == {n for n in model.model_fields if model.surface_of(n)["dag"]}


def test_api_validation_agrees_with_the_model(airflow_home) -> None:
    from fastapi.params import Path as PathParam
    from pydantic import ValidationError
    from rebalance_advisor.webui import api
    from rebalance_advisor.webui.schemas import DecisionBody, Strategy

    assert tuple(Strategy) == P.STRATEGY_NAMES
    for value, valid in probes(P.ApprovalParams, "note"):
        try:
            DecisionBody(note=value)
            accepted = True
        except ValidationError:
            accepted = False
        assert accepted is valid
    (path,) = [m for m in api.PlanId.__metadata__ if isinstance(m, PathParam)]
    ge = [getattr(m, "ge", None) for m in path.metadata if getattr(m, "ge", None) is not None]
    assert ge == [schema(P.ApprovalParams, "plan_id")["minimum"]]
