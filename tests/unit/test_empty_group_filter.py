"""An empty group regex means "no filter" on every surface: the CLI's ``--groups ''``, a DAG
run's conf or form and the API's parameters read it alike, and each surface's help says so (the DAG
form's description is the model's, checked in test_parameters)."""

from __future__ import annotations

import pytest
from rebalance_advisor.adapters.kafka_snapshot import GroupFilter
from rebalance_advisor.cli import build_parser
from rebalance_advisor.cli.options import params_from
from rebalance_advisor.domain.parameters import AdvisorParams, SnapshotParams

CASES = [
    (SnapshotParams, "groups", ["snapshot", "--groups", ""], "all groups"),
    (SnapshotParams, "exclude_groups", ["snapshot", "--exclude-groups", ""], "skip none"),
    (AdvisorParams, "group_regex", ["advise", "--groups", ""], "all groups"),
]


@pytest.mark.parametrize(("model", "field", "argv", "meaning"), CASES, ids=[c[1] for c in CASES])
def test_an_empty_group_regex_is_no_filter_on_every_surface(model, field, argv, meaning) -> None:
    from_cli = params_from(build_parser().parse_args(argv), model)
    from_conf = model.parse({field: ""})  # a DAG run's conf, an emptied form field, the API
    assert getattr(from_cli, field) is None and getattr(from_conf, field) is None
    assert getattr(model.parse({}), field) is None  # the same as not giving it
    description = model.model_fields[field].description  # test_parameters: the DAG form carries it
    assert f"empty: no filter: {meaning}" in description, description
    help_text = build_parser()._subparsers._group_actions[0].choices[argv[0]].format_help()  # noqa: SLF001
    assert "empty: no filter" in " ".join(help_text.split()), help_text


def test_the_snapshot_filter_built_from_empty_regexes_keeps_every_group() -> None:
    group_filter = GroupFilter.parse("", "")
    assert not group_filter.active
    assert all(group_filter.accepts(g) for g in ("orders", "", "x" * 300))
