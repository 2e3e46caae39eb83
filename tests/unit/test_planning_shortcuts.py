"""The planner's shortcuts change no advice: a fixed corpus of varied documents planned both ways.

``plan_group`` does not measure the current owners again when a strategy keeps them (their numbers
are the current ones), does not call the strategies of a one-member group whose owners are certain
(``sole_member_owners``), computes a spec's lag bounds once, computes a candidate's full metrics
only when it is the chosen plan (``candidate_numbers``: max member lag and imbalance for the others),
and no per-member load view for a candidate (``load_summary``). The corpus (tests/_groups.
seeded_document: one member or many, no lag, rates and capacities known for none, some or all, the
last interval's evidence, recent moves, three rule settings) is planned with the shortcut and
without them (``_measured_already`` giving nothing, so every candidate is measured;
``sole_member_owners`` knowing nothing, so every strategy is called; every metric and the
per-member view computed for each candidate, as before): the advice JSON
and the stored plan numbers are the same for every document, and the shortcut was taken.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime

from rebalance_advisor.domain import group_planning
from rebalance_advisor.domain.decisions import Thresholds
from rebalance_advisor.domain.load_model import summarize
from rebalance_advisor.domain.metrics import compute_metrics
from rebalance_advisor.store.plans import plan_numbers

from tests._groups import seeded_document

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
RULES = (Thresholds(), Thresholds(move_budget=3), Thresholds(min_improvement=0.3, lag_floor=0))


def _planned(docs: list[dict]) -> list[tuple[str, str]]:
    """Each document's advice JSON and its plan numbers (what the store writes)."""
    out = []
    for i, doc in enumerate(docs):
        advice = group_planning.plan_group(json.loads(json.dumps(doc)), RULES[i % len(RULES)], NOW)
        numbers = plan_numbers(advice) if advice.plan is not None else None
        out.append((advice.to_json(), json.dumps(numbers, sort_keys=True)))
    return out


def _every_metric(spec, owners, bound, handovers):
    """A candidate's numbers from all its metrics computed at once (the path before the lazy one)."""
    metrics = group_planning._rounded(compute_metrics(spec, owners, bound, moved=handovers))
    return metrics.max_member_lag, metrics.imbalance, lambda: metrics


def _noted(seen: list, value):
    seen.append(value)
    return value


def test_shortcuts_give_the_advice_of_the_full_path(monkeypatch):
    rng = random.Random(20261127)
    docs = [seeded_document(rng, NOW) for _ in range(400)]
    seeded, sole = group_planning._measured_already, group_planning.sole_member_owners
    measured, known = [], []
    monkeypatch.setattr(group_planning, "_measured_already", lambda c: measured.append(1) or seeded(c))
    monkeypatch.setattr(group_planning, "sole_member_owners", lambda *a: _noted(known, sole(*a)))
    lazy, candidate_metrics = [], group_planning.candidate_numbers
    monkeypatch.setattr(group_planning, "candidate_numbers", lambda *a: _noted(lazy, candidate_metrics(*a)))
    fast = _planned(docs)
    monkeypatch.setattr(group_planning, "_measured_already", lambda c: {})
    monkeypatch.setattr(group_planning, "sole_member_owners", lambda *a: None)
    monkeypatch.setattr(group_planning, "candidate_numbers", _every_metric)
    monkeypatch.setattr(group_planning, "load_summary", lambda *a: summarize(*a)[0])
    full = _planned(docs)
    assert len(measured) > 200  # flagged groups, where the candidates are measured
    assert sum(o is not None for o in known) > 100  # one-member groups' strategies not called
    assert sum(m.cache_info().currsize == 0 for _, _, m in lazy) > 200  # metrics never computed
    outcomes = {json.loads(advice)["outcome"] for advice, _ in full}
    assert {"recommended", "idle", "no_better_plan"} <= outcomes, outcomes
    for i, (a, b) in enumerate(zip(fast, full, strict=True)):
        assert a == b, (i, docs[i]["group_id"])


def _claims_spec(rng: random.Random) -> dict:
    """A spec document whose members claim partitions at random: generations known or not, equal
    at the top (a tie: nobody owns), claims twice, topics the claimant does not subscribe, and now
    and then a partition that does not exist."""
    topics = {f"t{t}": rng.randint(1, 4) for t in range(rng.randint(1, 3))}
    names = sorted(topics)
    members = []
    for m in range(rng.randint(1, 4)):
        owned = [
            [t, rng.randrange(topics[t] + (rng.random() < 0.03))]
            for t in rng.choices(names, k=rng.randint(0, 5))
        ]
        members.append({"member_id": f"m{m}", "topics": rng.sample(names, rng.randint(1, len(names))),
                        "owned": owned, "generation": rng.choice([None, 1, 2, 2])})  # fmt: skip
    partitions = [
        {"topic": t, "partition": p, "lag": rng.randint(0, 9)} for t in names for p in range(topics[t])
    ]
    return {"group_id": "g", "members": members, "partitions": partitions}


def _owners_or_error(doc: dict):
    from rebalance_advisor.domain.group_spec import parse_group_spec
    from rebalance_advisor.errors import AdvisorError

    try:
        spec = parse_group_spec(doc)
    except AdvisorError as error:
        return str(error)
    return spec.owner.dtype, spec.owner.tolist(), spec.owner_valid.dtype, spec.owner_valid.tolist()


def test_small_groups_owners_resolve_as_numpy_resolves_them(monkeypatch):
    """A small group's current owners in plain Python (``group_spec._small_owners``) are NumPy's:
    owners, ties, unsubscribed owners and the error for a partition that does not exist."""
    from rebalance_advisor.domain import group_spec

    rng = random.Random(31)
    docs = [_claims_spec(rng) for _ in range(600)]
    taken = []
    small = group_spec._small_owners
    monkeypatch.setattr(group_spec, "_small_owners", lambda *a: _noted(taken, small(*a)))
    fast = [_owners_or_error(d) for d in docs]
    monkeypatch.setattr(group_spec, "SMALL_CLAIMS", -1)
    slow = [_owners_or_error(d) for d in docs]
    assert sum(t is not None for t in taken) > 400
    assert sum(isinstance(f, str) for f in fast) > 10  # missing partitions refused
    assert sum(-1 in f[1] for f in fast if not isinstance(f, str)) > 50  # ties and unowned partitions
    assert sum(False in f[3] for f in fast if not isinstance(f, str)) > 20  # owners not subscribed
    assert fast == slow
