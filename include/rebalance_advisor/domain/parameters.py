"""The one parameter model of each entry point: snapshot, advisor, approval, static members.

Each field is declared once, here: name, type, default, bounds, description, and on which surfaces
it appears. Everything else is generated from these models (docs/architecture.md, "Parameters"):

- the Airflow ``Param`` of each DAG (:func:`rebalance_advisor.dag_tasks.forms.dag_params`),
- the CLI options (:func:`rebalance_advisor.cli.options.add_options`),
- the web API's request validation (:mod:`rebalance_advisor.webui.schemas`).

Adding a parameter is one new field in one model below; ``tests/unit/test_parameters.py`` checks
that the DAG form, the CLI and the API agree with the model for every field.

This module is imported when the dag-processor parses a DAG file: stdlib and pydantic only.
"""

from __future__ import annotations

import contextlib
import math
import re
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from rebalance_advisor.errors import AdvisorError

#: the assignor registry's names (``domain.assignors.ASSIGNORS``; a test checks they agree). Kept
#: literal so parsing a DAG file imports no NumPy. A new strategy adds its name here.
StrategyName = Literal[
    "range",
    "roundrobin",
    "sticky",
    "lag_aware",
    "lag_aware_sticky",
    "rate_aware",
    "rate_aware_sticky",
    "key_range",
]
STRATEGY_NAMES: tuple[str, ...] = get_args(StrategyName)
#: strategies that change how members consume (key_range: members filter records by key hash):
#: candidates only when named, never by default
OPT_IN_STRATEGY_NAMES: tuple[str, ...] = ("key_range",)
DEFAULT_STRATEGY_NAMES: tuple[str, ...] = tuple(s for s in STRATEGY_NAMES if s not in OPT_IN_STRATEGY_NAMES)

ApprovalDecision = Literal["ask", "approve", "reject"]
MemberAction = Literal["add", "remove"]
PublishMode = Literal["recommend", "static"]

#: ids without leading or trailing whitespace; topic names as Kafka allows them
ID_PATTERN = r"^\S(.*\S)?$"
TOPIC_PATTERN = r"^[A-Za-z0-9._-]{1,249}$"


class ParameterError(AdvisorError, ValueError):
    """Parameters outside their declared type or bounds (a user error: retrying cannot fix it)."""


#: how a number bound reads, by its JSON-schema keyword (the forms and the CLI say it alike)
BOUND_WORDS = {"minimum": "at least", "exclusiveMinimum": "above", "maximum": "at most",
               "exclusiveMaximum": "below"}  # fmt: skip
#: pydantic's error type of each bound, with the context key holding the bound
_PYDANTIC_BOUNDS = {"greater_than_equal": ("minimum", "ge"), "greater_than": ("exclusiveMinimum", "gt"),
                    "less_than_equal": ("maximum", "le"), "less_than": ("exclusiveMaximum", "lt")}  # fmt: skip


def readable_number(value: float) -> str:
    """1000000 -> "1,000,000"; 0.5 -> "0.5": what a person reads, never exponent notation."""
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.6f}".rstrip("0").rstrip(".")


def readable_value(value: Any, limit: int = 60) -> str:
    """A value a person gave, as they would read it back: numbers with digits written out, text
    quoted and cut at ``limit`` characters."""
    if isinstance(value, bool) or value is None:
        return {True: "on", False: "off", None: "nothing"}[value]
    if isinstance(value, int | float):
        return readable_number(value) if math.isfinite(value) else str(value)  # nan, inf
    text = value if isinstance(value, str) else repr(value)
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def bound_refusal(keyword: str, bound: float, given: Any) -> str:
    """ "must be at most 1,000,000 (you gave 2,000,000)": a number outside a bound, in words (``given``
    may be the text it was read from, as the CLI's)."""
    if isinstance(given, str):
        with contextlib.suppress(ValueError):
            given = float(given)
    return f"must be {BOUND_WORDS[keyword]} {readable_number(bound)} (you gave {readable_value(given)})"


def error_words(item: Any) -> str:
    """What one pydantic error says, a number outside a bound in the forms' words."""
    if item.get("type") in _PYDANTIC_BOUNDS:
        keyword, key = _PYDANTIC_BOUNDS[item["type"]]
        return bound_refusal(keyword, (item.get("ctx") or {})[key], item.get("input"))
    return str(item.get("msg"))


def describe_errors(error: ValidationError) -> str:
    """One line naming each bad field and what is wrong with it (bounds in the forms' words)."""
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item.get("loc", ())) or "parameters"
        parts.append(f"{where}: {error_words(item)}")
    return "invalid parameters: " + "; ".join(parts)


def surface(
    default: Any = ...,
    *,
    description: str,
    cli: str | None = None,
    dag: bool = True,
    section: str | None = None,
    form: dict[str, Any] | None = None,
    **constraints: Any,
) -> Any:
    """A field with where it appears: ``cli`` is its flag (``--x``) or positional name, None for
    none; ``dag`` whether the DAG form shows it; ``section`` the form's section; ``form`` extra
    JSON-schema keywords for the form that pydantic does not derive (format, uniqueItems, examples)."""
    extra: dict[str, Any] = dict(form or {})
    extra["x-cli"] = cli
    extra["x-dag"] = dag
    if section:
        extra["x-section"] = section
    return Field(default, description=description, json_schema_extra=extra, **constraints)


class ParamModel(BaseModel):
    """Base of the parameter models: frozen; invalid values raise :class:`ParameterError`."""

    model_config = ConfigDict(frozen=True, extra="ignore", validate_default=True)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as error:
            raise ParameterError(describe_errors(error)) from None

    @classmethod
    def parse(cls, data: dict[str, Any]) -> Any:
        """Validate a mapping (DAG params, CLI namespace, request body); unknown keys are ignored; a
        toggle given as null takes its default (the DAG form's toggles admit null: dag_tasks/forms.py)."""
        toggles = {n for n, f in cls.model_fields.items() if f.annotation in (bool, "bool")}
        return cls(**{k: v for k, v in data.items() if not (v is None and k in toggles)})

    @classmethod
    def surface_of(cls, name: str) -> dict[str, Any]:
        """The ``x-`` keys of a field (cli, dag, section)."""
        extra = cls.model_fields[name].json_schema_extra or {}
        return {k[2:]: v for k, v in extra.items() if k.startswith("x-")}  # type: ignore[union-attr]


#: what an empty regex parameter means, said once for every surface (CLI help, DAG form, API)
EMPTY_FILTER = "empty: no filter"


#: the form's check of a regex field, before a run exists: refuses what RE2 never runs (look-around,
#: atomic groups, back-references). JSON Schema cannot call RE2; the model's validator
#: (:func:`compiled_regex`) still checks everything else when the run parses its params.
RE2_FORM_PATTERN = r"^(?![\s\S]*(?:\(\?<?[=!]|\(\?>|\(\?P=|\\[1-9]))[\s\S]*$"
#: what the form says when a value breaks a keyword (``errorMessage``, by keyword, as ajv-errors
#: spells it; dag_tasks/form_validation.py reads it): words for patterns, which a person cannot read
REGEX_FORM = {
    "format": "regex",
    "pattern": RE2_FORM_PATTERN,
    "errorMessage": {
        "pattern": "uses look-around, an atomic group or a back-reference, which RE2 (linear time) "
        "never runs: write the regex without them",
        "format": "is not a regular expression (check brackets, parentheses and escapes)",
    },
}


def _case_free(word: str) -> str:
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in word)


def reset_form_pattern() -> str:
    """The grammar of ``reset_policy`` as a form pattern: comma-separated ``[REGEX=]VALUE`` items,
    each value one of ``lag.RESET_VALUES`` in any case (what :meth:`ResetPolicy.parse` reads)."""
    from rebalance_advisor.domain.lag import RESET_VALUES

    value = "(?:" + "|".join(_case_free(v) for v in RESET_VALUES) + ")"
    item = rf"(?:[^,]*=)?\s*{value}\s*"
    return rf"^\s*(?:{item})?(?:,\s*(?:{item})?)*$"


def reset_form() -> dict[str, Any]:
    """The form keywords of ``reset_policy``: its grammar, an example, and the grammar in words."""
    from rebalance_advisor.domain.lag import RESET_VALUES

    example = "orders-.*=earliest,latest"
    said = (f"write comma-separated [GROUP_REGEX=]VALUE items, each VALUE one of {', '.join(RESET_VALUES)}, "
            f"e.g. '{example}'")  # fmt: skip
    return {"pattern": reset_form_pattern(), "examples": [example], "errorMessage": {"pattern": said}}


def capacity_form() -> dict[str, Any]:
    """The form keywords of ``member_capacity``: the grammar ``estimates.CapacityPolicy.parse`` reads
    (comma-separated ``[MEMBER_REGEX@]GROUP_REGEX=RATE``, the rate after the last ``=``, a number above
    0; the regexes themselves are compiled by the run) as a pattern, examples, and the grammar in words."""
    digits = r"[0-9](?:_?[0-9])*"  # float() takes 1_000
    rate = rf"\s*\+?(?=[0-9_.]*[1-9])(?:{digits}(?:\.(?:{digits})?)?|\.{digits})(?:[eE][+-]?{digits})?\s*"
    member_at_group = r"[^,@]*[^\s,@][^,@]*@[^,]*[^\s,][^,]*"
    item = rf"(?:{member_at_group}|[^,@]*[^\s,@][^,@]*)={rate}"
    examples = ["orders-.*=500,audit=50", "big-.*@orders-.*=2000,orders-.*=500"]
    said = ("write comma-separated GROUP_REGEX=RATE or MEMBER_REGEX@GROUP_REGEX=RATE items, each RATE "
            f"(records/s) a number above 0, e.g. '{examples[1]}'")  # fmt: skip
    pattern = rf"^\s*(?:{item})?\s*(?:,\s*(?:{item})?\s*)*$"
    return {"pattern": pattern, "examples": examples, "errorMessage": {"pattern": said}}


def compiled_regex(value: str | None) -> str | None:
    """A regex parameter: empty means none (an emptied form field is no filter, not an error, so the
    CLI, the DAG form and the API read ``''`` alike); one RE2 cannot run (linear time) is refused."""
    if value:
        from rebalance_advisor.domain.safe_regex import compile_safe_regex

        try:
            compile_safe_regex(value, "group")
        except AdvisorError as error:
            raise ValueError(str(error)) from None
    return value or None


def unique_values(values: tuple[str, ...]) -> tuple[str, ...]:
    """A list parameter that names each value at most once."""
    if len(set(values)) != len(values):
        raise ValueError("each value at most once")
    return values


RULES = "Decision rules"

#: the connection ids every DAG takes (one declaration, shared by the models)
DbConnId = Annotated[
    str, surface("rebalance_advisor_db", min_length=1, description="advisor DB connection (Airflow)")
]
KafkaConnId = Annotated[
    str, surface("kafka_default", min_length=1, description="Kafka connection (Airflow provider 'kafka')")
]
#: the DAGs that publish plans (the advisor in static mode, the approval DAG) take the same one
CapacityPassSeconds = Annotated[
    float | None,
    surface(
        None, ge=0.0, le=3600.0,
        description="after publishing a plan made while some member's capacity was unknown, trigger two more "
        "snapshots, 40 s later (its handovers over) and this many seconds after that, each unless the "
        "scheduled one comes first, so the members it loaded are measured soon (0: never; empty: 120 s)",
    ),
]  # fmt: skip


def capacity_pass_seconds(value: float | None) -> float:
    """Seconds from the capacity pass's first snapshot to its second, which measures the members a
    plan published on unknown capacities loaded (0: no pass; ``estimates.RateParameters.capacity_pass_s``
    when not set)."""
    from rebalance_advisor.domain.estimates import RateParameters

    return RateParameters.capacity_pass_s if value is None else value


#: the auto capacity margin grows by this much per minute between the two snapshots the rates come
#: from: a member's inflow drifts until the next plan, and an overload shows only a snapshot or two
#: later (bench/drain.py: 2 % held at 1-minute snapshots and let large-500 be overloaded 15 % of the
#: time at 5-minute ones; 8 % there: 2.5 %)
MARGIN_PER_MINUTE = 0.016
#: the auto margin's bounds
MARGIN_MIN, MARGIN_MAX = 0.02, 0.20


def auto_capacity_margin(interval_s: float | None) -> float:
    """The capacity margin for snapshots ``interval_s`` apart. Unknown (None): the minimum, as before
    the margin was automatic; the planner knows the interval of every stored snapshot with rates,
    so only a hand-written ``plan`` document without ``rate_interval_s`` gets it."""
    if not interval_s or interval_s <= 0:
        return MARGIN_MIN
    return round(min(MARGIN_MAX, max(MARGIN_MIN, MARGIN_PER_MINUTE * interval_s / 60.0)), 6)


class Thresholds(ParamModel):
    """The knobs of the decision rules (domain/decisions.py explains each default)."""

    imbalance_threshold: float = surface(
        1.25, ge=1.0, le=100.0, cli="--imbalance-threshold", section=RULES,
        description="without capacities: flag a group when max / mean member load >= this",
    )  # fmt: skip
    lag_floor: int = surface(
        1000, ge=0, le=10**15, cli="--lag-floor", section=RULES,
        description="a group with less total lag (messages), nobody overloaded and (with capacities) every "
        "predicted catch-up within the target, is idle",
    )  # fmt: skip
    min_improvement: float = surface(
        0.10, ge=0.0, lt=1.0, cli="--min-improvement", section=RULES,
        description="recommend only if predicted catch-up (or max load) drops by this fraction (0 <= x < 1)",
    )  # fmt: skip
    move_budget: int | None = surface(
        None, ge=0, le=1_000_000, cli="--move-budget", section=RULES,
        description="most partitions a plan may hand over beyond unowned ones (empty: unlimited)",
    )  # fmt: skip
    cooldown_minutes: float = surface(
        0.0, ge=0.0, le=10080.0, cli="--cooldown-minutes", section=RULES,
        description="optional fixed silence after a standing plan (0: off; hysteresis prevents flapping)",
    )  # fmt: skip
    strategies: tuple[StrategyName, ...] = surface(
        DEFAULT_STRATEGY_NAMES, min_length=1, cli="--strategies", section=RULES,
        form={"uniqueItems": True, "examples": list(STRATEGY_NAMES)},
        description="candidate strategies; ties prefer lag_aware, then lag_aware_sticky "
        "(key_range only when named)",
    )  # fmt: skip
    key_sharing: bool = surface(
        False, cli="--key-sharing", section=RULES,
        description="run-level opt-in: key_range may split partitions into key ranges "
        "(the topic and the members must opt in too)",
    )  # fmt: skip
    key_sharing_topics: str | None = surface(
        None, max_length=1000, cli="--key-sharing-topics", section=RULES, form=REGEX_FORM,
        description="topic-level opt-in: only topics whose name fully matches this regex are split (empty: none)",
    )  # fmt: skip
    target_catch_up_s: float = surface(
        300.0, ge=0.0, le=10**7, cli="--target-catch-up", section=RULES,
        description="flag a group whose predicted catch-up exceeds this many seconds",
    )  # fmt: skip
    horizon_s: float = surface(
        900.0, gt=0.0, le=10**7, cli="--horizon", section=RULES,
        description="seconds over which a plan's handover pause must be repaid (and lag is weighed)",
    )  # fmt: skip
    handover_cost_s: float = surface(
        5.0, ge=0.0, le=86400.0, cli="--handover-cost", section=RULES,
        description="seconds a moved partition pauses while it changes owner",
    )  # fmt: skip
    capacity_margin: float | None = surface(
        None, ge=0.0, lt=1.0, cli="--capacity-margin", section=RULES,
        description="the rule counts a member overloaded at inflow >= (1 - this) x capacity: rates are "
        "estimated over past minutes and drift until the next plan (0: at capacity; empty: auto, "
        "0.016 per minute between snapshots, at least 0.02: 0.08 for the default 5-minute snapshots)",
    )  # fmt: skip
    interval_departure: float = surface(
        0.1, ge=0.0, le=100.0, cli="--interval-departure", section=RULES,
        description="a partition plans on its produce rate over the last snapshot interval when that "
        "departs from the smoothed rate by more than this fraction of it (the guard against one noisy interval)",
    )  # fmt: skip
    growth_floor_s: float = surface(
        5.0, ge=0.0, le=3600.0, cli="--growth-floor", section=RULES,
        description="a member whose backlog grew across the last snapshot interval by more than this many "
        "seconds of its inflow, while it held the same partitions, is overloaded now (the guard against "
        "commit timing: a caught-up consumer shows up to its commit interval of lag)",
    )  # fmt: skip
    repack_share: float = surface(
        0.5, gt=0.0, le=1.0, cli="--repack-share", section=RULES,
        description="a plan handing over more than this share of the group's partitions (unowned ones aside) "
        "is a repack: it must cut the max member load or the excess inflow by repack_min_gain",
    )  # fmt: skip
    repack_min_gain: float = surface(
        0.05, ge=0.0, lt=1.0, cli="--repack-min-gain", section=RULES,
        description="the least relative drop of the max member load (utilisation, with capacities) or of "
        "the excess inflow that pays for a repack (a fraction, 0 <= x < 1)",
    )  # fmt: skip
    hysteresis_window_s: float = surface(
        1800.0, ge=0.0, le=10**7, cli="--hysteresis-window", section=RULES,
        description="a partition does not move back to an owner it left within this many seconds "
        "unless that removes an overload",
    )  # fmt: skip

    @field_validator("strategies")
    @classmethod
    def check_strategies(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return unique_values(value)

    @property
    def capacity_margin_in_force(self) -> float:
        """The margin the rules apply: the set one, else the auto one for an unknown interval (the
        planner resolves the interval's first, :meth:`for_rate_interval`)."""
        return auto_capacity_margin(None) if self.capacity_margin is None else self.capacity_margin

    def for_rate_interval(self, interval_s: float | None) -> Thresholds:
        """These thresholds with an auto ``capacity_margin`` (None) resolved for snapshots
        ``interval_s`` apart (:func:`auto_capacity_margin`); an explicit margin is kept."""
        if self.capacity_margin is not None:
            return self
        return self.model_copy(update={"capacity_margin": auto_capacity_margin(interval_s)})

    @field_validator("key_sharing_topics")
    @classmethod
    def check_key_sharing_topics(cls, value: str | None) -> str | None:
        return compiled_regex(value)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values of the rule fields only (what Spark executors and the runs row get)."""
        return Thresholds.model_dump(self, mode="json", include=set(Thresholds.model_fields))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Thresholds:
        return Thresholds.parse(data)


class AdvisorParams(Thresholds):
    """``kafka_rebalance_advisor`` and ``rebalance-advisor advise``."""

    snapshot: str = surface(
        "latest", pattern=r"^(latest|[0-9]+)$", cli="--snapshot",
        form={"errorMessage": {"pattern": "write 'latest' or a snapshot id (digits only)"}},
        description="snapshot id, or 'latest' (the triggering snapshot when scheduled)",
    )  # fmt: skip
    group_regex: str | None = surface(
        None, max_length=1000, cli="--groups", form=REGEX_FORM,
        description=f"only groups whose id fully matches this regex ({EMPTY_FILTER}: all groups)",
    )  # fmt: skip
    publish_mode: PublishMode = surface(
        "recommend", description="recommend: record plans; static: also approve and publish them"
    )
    dry_run: bool = surface(False, cli="--dry-run", description="plan and log, write nothing")
    reset_policy: str | None = surface(
        None, max_length=2000, cli="--reset-policy",
        form=reset_form(),
        description="auto.offset.reset per group, e.g. 'orders-.*=earliest,latest' "
        "(values: latest, earliest, none, by_duration)",
    )  # fmt: skip
    capacity_pass_s: CapacityPassSeconds
    db_conn_id: DbConnId
    kafka_conn_id: KafkaConnId

    @field_validator("group_regex")
    @classmethod
    def check_regex(cls, value: str | None) -> str | None:
        return compiled_regex(value)

    @field_validator("reset_policy")
    @classmethod
    def check_reset_policy(cls, value: str | None) -> str | None:
        """Parsed when the params are (CLI: before anything; DAG: the run's first task), not when
        the planner reaches it after Spark started."""
        from rebalance_advisor.domain.lag import ResetPolicy

        if value:
            try:
                ResetPolicy.parse(value)
            except AdvisorError as error:
                raise ValueError(str(error)) from None
        return value or None

    def thresholds(self) -> Thresholds:
        """The decision-rule part."""
        return Thresholds.parse(self.to_dict())


class SnapshotParams(ParamModel):
    """``kafka_offsets_snapshot`` and ``rebalance-advisor snapshot``."""

    kafka_conn_id: KafkaConnId
    db_conn_id: DbConnId
    groups: str | None = surface(
        None, max_length=1000, cli="--groups", form=REGEX_FORM,
        description=f"only groups fully matching this regex ({EMPTY_FILTER}: all groups)",
    )  # fmt: skip
    exclude_groups: str | None = surface(
        None, max_length=1000, cli="--exclude-groups", form=REGEX_FORM,
        description=f"skip groups fully matching this regex ({EMPTY_FILTER}: skip none)",
    )  # fmt: skip
    include_internal_topics: bool = surface(
        False, cli="--include-internal-topics", dag=False, description="keep __consumer_offsets and friends"
    )
    read_committed: bool = surface(
        False, cli="--read-committed", description="also store read_committed end offsets (LSO)"
    )
    retention_hours: float = surface(
        168.0, ge=0.0, le=87600.0, description="prune snapshots older than this many hours (0: keep all)"
    )
    plan_retention_hours: float = surface(
        720.0, ge=0.0, le=87600.0,
        description="prune advisor runs older than this many hours, with their outcomes and their "
        "superseded or rejected plans; standing plans and the newest run stay (0: keep all)",
    )  # fmt: skip
    timeout_s: float = surface(
        30.0, gt=0.0, le=3600.0, cli="--timeout", description="seconds per Kafka request"
    )
    skip_time_lag: bool = surface(
        False, cli="--no-time-lag",
        description="do not read record timestamps at committed offsets (time lag then estimated from rates)",
    )  # fmt: skip
    skip_share_groups: bool = surface(
        False, cli="--no-share-groups",
        description="do not read share groups (they are read through Kafka's Java AdminClient, which needs Java)",
    )  # fmt: skip
    member_capacity: str | None = surface(
        None, max_length=1000, cli="--member-capacity", form=capacity_form(),
        description="records/s a member can process: GROUP_REGEX=N for the members of a group with no measured "
        "member; MEMBER_REGEX@GROUP_REGEX=N for one member (static instance id, else member id) while it is not "
        "measured, e.g. 'big-.*@orders-.*=2000,orders-.*=500'",
    )  # fmt: skip

    rate_pass_s: float | None = surface(
        None, ge=0.0, le=600.0, cli="--rate-pass",
        description="when a snapshot gives no rates (no earlier snapshot of the cluster in the store within "
        "the hour), take a second pass this many seconds later, so the first advice has rates (0: never; "
        "empty: 30 s when scheduled, never for one snapshot command)",
    )  # fmt: skip

    @field_validator("groups", "exclude_groups")
    @classmethod
    def check_regex(cls, value: str | None) -> str | None:
        return compiled_regex(value)

    @field_validator("rate_pass_s")
    @classmethod
    def check_rate_pass(cls, value: float | None) -> float | None:
        from rebalance_advisor.domain.estimates import RateParameters

        shortest = RateParameters.min_interval_s
        if value and value < shortest:
            raise ValueError(f"must be 0 or at least {shortest:g} s (a shorter interval gives no rates)")
        return value

    def rate_pass(self, scheduled: bool) -> float:
        """Seconds to the second pass after a snapshot without rates (0: none): the scheduled service
        takes one by default (``estimates.RateParameters.rate_pass_s``), one snapshot command does not."""
        from rebalance_advisor.domain.estimates import RateParameters

        if self.rate_pass_s is not None:
            return self.rate_pass_s
        return RateParameters.rate_pass_s if scheduled else 0.0

    @field_validator("member_capacity")
    @classmethod
    def check_member_capacity(cls, value: str | None) -> str | None:
        from rebalance_advisor.domain.estimates import CapacityPolicy

        try:
            CapacityPolicy.parse(value)
        except AdvisorError as error:
            raise ValueError(str(error)) from None
        return value or None


class ApprovalParams(ParamModel):
    """``kafka_plan_approval``, ``rebalance-advisor plan-status`` and the API's approve/reject."""

    plan_id: int = surface(
        ge=1, le=2**63 - 1, cli="plan_id", description="the plan (see `rebalance-advisor plans`)"
    )  # a database id: larger numbers cannot be looked up (the driver would overflow)
    decision: ApprovalDecision = surface(
        "ask", description="ask: wait for a person's Approve/Reject in Airflow; approve/reject: decide now"
    )
    note: str | None = surface(
        None, max_length=2000, cli="--note", description="why (stored with the transition)"
    )
    publish: bool = surface(True, description="publish right after approval")
    capacity_pass_s: CapacityPassSeconds
    kafka_conn_id: KafkaConnId
    db_conn_id: DbConnId


#: Bytes (UTF-8) an id may have to be stored: Kafka takes up to 32,767 characters, but a PostgreSQL
#: btree index entry holds at most ~2,700 bytes and the store's keys hold a group id, a member id
#: and a topic name (249) together. Longer ids are refused with this limit named (store/id_limits.py).
STORED_ID_BYTES = 1200


def oversized_id(what: str, value: str) -> str | None:
    """Why ``value`` is too long to store, naming the limit; None when it fits."""
    size = len(value.encode("utf-8", "surrogatepass"))
    if size <= STORED_ID_BYTES:
        return None
    return (
        f"its {what} has {size:,} bytes; the store takes ids up to {STORED_ID_BYTES:,} bytes "
        "(a PostgreSQL index key holds ~2,700 bytes): use a shorter id"
    )


def id_with_nul(what: str, value: str) -> str | None:
    """Why ``value``, holding a NUL character (legal in Java), cannot be stored; None without one."""
    if "\x00" not in value:
        return None
    return (
        f"its {what} holds a NUL character (U+0000), which PostgreSQL text cannot hold and librdkafka "
        "cuts ids at: use one without it"
    )


def _storable_id(value: str) -> str:
    if reason := oversized_id("id", value):
        raise ValueError(reason.replace("its id has", "the id has"))
    return value


#: a group or member id the store can keep (characters bound for the forms, bytes checked too)
Identifier = Annotated[
    str,
    Field(min_length=1, max_length=STORED_ID_BYTES, pattern=ID_PATTERN,
          json_schema_extra={"errorMessage": {"pattern": "must not start or end with a space"}}),
    AfterValidator(_storable_id),
]  # fmt: skip
TopicName = Annotated[
    str,
    Field(pattern=TOPIC_PATTERN, json_schema_extra={"errorMessage": {
        "pattern": "a topic name has 1 to 249 letters, digits, '.', '_' or '-'"}}),
]  # fmt: skip


class StaticMemberParams(ParamModel):
    """``kafka_static_members`` and ``rebalance-advisor members``."""

    action: MemberAction = surface("add", description="register or unregister")
    group_id: Identifier = surface(cli="group", description="consumer group id")
    member_id: Identifier = surface(
        cli="member", description="member id: what the consumer passes to AssignedConsumer"
    )
    topics: tuple[TopicName, ...] = surface(
        (), cli="topics", form={"uniqueItems": True},
        description="topics the member consumes (needed for add, ignored for remove)",
    )  # fmt: skip
    share_keys: bool = surface(
        False, cli="--share-keys",
        description="add: the member may take key ranges of a split partition (key_range; "
        "the run and the topic must allow it too)",
    )  # fmt: skip
    db_conn_id: DbConnId

    @field_validator("topics")
    @classmethod
    def check_topics(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return unique_values(value)


#: the DAG ids: each DAG function's name in dags/ (tests/unit/test_layers.py checks them)
SNAPSHOT_DAG_ID = "kafka_offsets_snapshot"
ADVISOR_DAG_ID = "kafka_rebalance_advisor"
APPROVAL_DAG_ID = "kafka_plan_approval"
STATIC_MEMBERS_DAG_ID = "kafka_static_members"

#: every entry point's model, by DAG id
MODELS: dict[str, type[ParamModel]] = {
    SNAPSHOT_DAG_ID: SnapshotParams,
    ADVISOR_DAG_ID: AdvisorParams,
    APPROVAL_DAG_ID: ApprovalParams,
    STATIC_MEMBERS_DAG_ID: StaticMemberParams,
}


def field_bounds(model: type[ParamModel], name: str) -> dict[str, Any]:
    """A field's constraints as keyword arguments (``ge``, ``lt``, ``max_length``, ``pattern`` ...),
    for generators whose API takes them so (FastAPI ``Path``/``Query``)."""
    bounds: dict[str, Any] = {}
    for item in model.model_fields[name].metadata:
        for key in ("ge", "gt", "le", "lt", "min_length", "max_length", "pattern"):
            value = getattr(item, key, None)
            if value is not None:
                bounds[key] = value
    return bounds
