"""``parse_group_spec`` reads the partitions in bulk when every entry is plainly valid and falls back
to the checking loop otherwise: for any partitions list, the bulk path either gives exactly the
loop's columns (values and types) or steps aside, and never accepts what the loop refuses."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from rebalance_advisor.domain import group_spec
from rebalance_advisor.errors import AdvisorError

# Valid values most of the time, with every kind of wrong one mixed in.
TOPICS = st.sampled_from(["t", "u", "orders"]) | st.sampled_from(["", None, 3, b"t"])
NUMBERS = st.integers(0, 40) | st.sampled_from([-1, 2**63, 2**64, 1.0, True, "1", None])
LAGS = st.integers(0, 10**6) | st.sampled_from([-5, 2**63 - 1, 2**63, 7.0, False, None, "9"])
RATES = (
    st.none()
    | st.floats(0, 1e6)
    | st.sampled_from([0, 12, -1.0, math.nan, math.inf, -math.inf, True, "2.5", 1e308])
)


@st.composite
def partition_entries(draw):
    entry = {}
    for key, values in (("topic", TOPICS), ("partition", NUMBERS), ("lag", LAGS)):
        if draw(st.integers(0, 30)):  # now and then a key is missing
            entry[key] = draw(values)
    if draw(st.booleans()):
        entry["produce_rate"] = draw(RATES)
    if not draw(st.integers(0, 30)):
        entry["owend"] = 1  # a misspelt key
    return draw(st.sampled_from([entry, entry, entry, entry, [1, 2], None]))


def typed(columns):
    """Columns with each value's type, so that 1 and 1.0 or True differ."""
    return [[(type(v), v) for v in column] for column in columns]


def same_as_the_loop(raw):
    """The bulk path gives the loop's typed columns, or None; never columns the loop refuses."""
    try:
        checked = group_spec._checked_partition_columns(raw)
    except AdvisorError:
        checked = None
    plain = group_spec._plain_partition_columns(raw)
    if plain is not None:
        assert checked is not None, "the bulk path accepted what the checking loop refuses"
        assert typed(plain) == typed(checked)


@settings(deadline=None)
@given(raw=st.lists(partition_entries(), max_size=6))
def test_bulk_partition_columns_equal_the_checking_loop(raw):
    same_as_the_loop(raw)


VALID = st.fixed_dictionaries(
    {"topic": st.sampled_from(["t", "u"]), "partition": st.integers(0, 99), "lag": st.integers(0, 10**9)},
    optional={"produce_rate": st.none() | st.floats(0, 1e6)},
)
WRONG = {
    "topic": ["", None, 3, b"t"],
    "partition": [-1, 2**63, 1.0, True, "1", None],
    "lag": [-5, 2**63, 7.0, False, None, "9"],
    "produce_rate": [0, 12, -1.0, math.nan, math.inf, True, "2.5"],
}


@st.composite
def one_wrong(draw):
    """Valid partitions with at most one thing wrong: a bad value, a missing or extra key, a non-object."""
    raw = draw(st.lists(VALID, min_size=1, max_size=8))
    j = draw(st.integers(0, len(raw) - 1))
    how = draw(st.sampled_from(["value", "value", "value", "missing", "extra", "not_object", "none"]))
    if how == "value":
        key = draw(st.sampled_from(sorted(WRONG)))
        raw[j][key] = draw(st.sampled_from(WRONG[key]))
    elif how == "missing":
        raw[j].pop(draw(st.sampled_from(["topic", "partition", "lag"])))
    elif how == "extra":
        raw[j]["owend"] = 1
    elif how == "not_object":
        raw[j] = draw(st.sampled_from([None, [1, 2], "t"]))
    return raw


@settings(deadline=None)
@given(raw=one_wrong())
def test_one_wrong_thing_is_left_to_the_checking_loop(raw):
    same_as_the_loop(raw)


@settings(deadline=None)
@given(raw=st.lists(VALID, max_size=8))
def test_valid_documents_take_the_bulk_path(raw):
    """What the snapshot documents look like passes in bulk (else the fast path would be dead code)."""
    assert group_spec._plain_partition_columns(raw) is not None
