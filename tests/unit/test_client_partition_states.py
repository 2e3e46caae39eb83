"""The per-partition states of the client helper (partition_states.py), worked by hand, no broker.

Each case is a handover the real-broker tests (tests/integration/test_client_*.py) also live
through; here the transitions are checked one at a time: a claim that meets a newer epoch, a
release, a takeover after the timeout, a fenced-out owner. The producers are stand-ins: a record
only ever closes them. docs/protocol/states.md.
"""

from __future__ import annotations

from rebalance_advisor_client.handover_rules import (
    OWNED,
    RELEASED,
    Claim,
    OwnerMark,
    claim_decision,
    claim_start,
)
from rebalance_advisor_client.partition_states import ClaimVerdict, PartitionState, PartitionTable

TP = ("orders", 3)
TIMEOUT = 60.0


class _Producer:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def _claiming(table: PartitionTable, at: float = 100.0) -> None:
    table.gain(TP, at)
    table.start_claim(TP)


def _owned(table: PartitionTable, epoch: int, start: int, txn: _Producer | None = None) -> None:
    _claiming(table)
    assert table.finish_claim(TP, epoch, start, txn, epoch, assigned=True) is ClaimVerdict.ASSIGN


def test_a_gained_partition_waits_then_claims_at_the_claimed_offset() -> None:
    table = PartitionTable()
    table.gain(TP, 100.0)
    assert table.get(TP).state is PartitionState.WAITING and table.claimable() == [TP]
    spare = _Producer()
    table.make_spares(lambda tp: spare)
    assert table.start_claim(TP) is spare  # the claim fences with the producer made ahead
    assert table.get(TP).state is PartitionState.CLAIMING
    assert table.claimable() == [] and table.waiting() == [TP]  # no second claim while one runs
    table.make_spares(lambda tp: _Producer())
    assert table.get(TP).spare is None  # a running claim has its own producer
    assert table.finish_claim(TP, 5, 42, spare, 5, assigned=True) is ClaimVerdict.ASSIGN
    record = table.held(TP)
    assert (record.state, record.claimed_at, record.position, record.committed) == (
        PartitionState.OWNED,
        5,
        42,
        42,
    )
    assert record.txn is spare and not spare.closed
    assert table.owned() == {TP} and table.waiting() == []


def test_a_claim_that_did_not_go_through_waits_again_and_keeps_its_producer_as_the_spare() -> None:
    table = PartitionTable()
    _claiming(table)
    first = _Producer()
    assert table.finish_claim(TP, 5, None, first, 5, assigned=True) is ClaimVerdict.NOT_CLAIMED
    record = table.get(TP)
    assert record.state is PartitionState.WAITING and record.spare is first and not first.closed
    assert record.waiting_since == 100.0  # the takeover clock runs on from the gain
    table.make_spares(lambda tp: _Producer())
    assert table.start_claim(TP) is first  # the next claim fences with it


def test_a_claim_that_meets_an_epoch_which_moved_the_partition_away_is_released_at_once() -> None:
    """Claimed at 5 while epoch 6 gave the partition to someone else: our mark says we own it, so
    the successor would wait for the takeover timeout unless we release it now."""
    table = PartitionTable()
    _claiming(table)
    assert table.lose([TP]) == []  # not held yet: the running claim decides
    assert table.get(TP).state is PartitionState.CLAIMING and table.waiting() == []
    txn = _Producer()
    assert table.finish_claim(TP, 5, 42, txn, 6, assigned=False) is ClaimVerdict.RELEASE_AT_ONCE
    record = table.held(TP)
    assert record.claimed_at == 5 and record.position == 42 and not txn.closed  # released with it


def test_a_claim_that_meets_the_next_epoch_still_giving_the_partition_is_kept() -> None:
    table = PartitionTable()
    _claiming(table)
    assert table.finish_claim(TP, 5, 42, None, 6, assigned=True) is ClaimVerdict.ASSIGN
    assert table.held(TP).claimed_at == 5  # commits are checked against the claim's epoch


def test_a_claim_that_meets_skipped_epochs_is_claimed_again() -> None:
    """Claimed at 5, the member now at 7: another member may have held it at 6."""
    table = PartitionTable()
    _claiming(table)
    txn = _Producer()
    assert table.finish_claim(TP, 5, 42, txn, 7, assigned=True) is ClaimVerdict.CLAIM_AGAIN
    assert txn.closed and table.held(TP) is None
    assert table.get(TP).state is PartitionState.WAITING and table.claimable() == [TP]


def test_lost_and_regained_while_claiming_restarts_the_takeover_clock() -> None:
    table = PartitionTable()
    _claiming(table, at=100.0)
    table.lose([TP])
    table.gain(TP, 130.0)
    assert table.get(TP).state is PartitionState.CLAIMING  # the old claim still runs: no second one
    assert table.get(TP).waiting_since == 130.0
    assert table.finish_claim(TP, 5, 42, None, 7, assigned=True) is ClaimVerdict.CLAIM_AGAIN
    assert table.get(TP).waiting_since == 130.0


def test_a_lost_claim_that_did_not_go_through_is_forgotten_and_closes_its_producer() -> None:
    table = PartitionTable()
    _claiming(table)
    table.lose([TP])
    txn = _Producer()
    assert table.finish_claim(TP, 5, None, txn, 6, assigned=False) is ClaimVerdict.NOT_CLAIMED
    assert txn.closed and table.get(TP) is None


def test_a_release_stops_handing_out_then_forgets_the_partition() -> None:
    table = PartitionTable()
    txn = _Producer()
    _owned(table, 5, 42, txn)
    assert table.lose([TP]) == [TP]  # held: the caller releases it
    table.start_release([TP])
    record = table.held(TP)
    assert record.state is PartitionState.RELEASING  # still held: the released mark needs its claim epoch
    assert not txn.closed
    table.released(TP)
    assert txn.closed and table.get(TP) is None and table.owned() == frozenset()


def test_a_lost_waiting_partition_is_forgotten_with_its_spare() -> None:
    table = PartitionTable()
    table.gain(TP, 100.0)
    spare = _Producer()
    table.make_spares(lambda tp: spare)
    assert table.lose([TP]) == []
    assert spare.closed and table.get(TP) is None


def test_a_takeover_comes_after_the_timeout_counted_from_the_gain() -> None:
    """The previous owner (epoch 4) never releases: wait, then take over once the partition has
    waited ``takeover_timeout``; a kept epoch does not restart the clock."""
    table = PartitionTable()
    table.gain(TP, 100.0)
    table.gain(TP, 120.0)  # epoch 6 keeps giving it: still waiting since 100
    previous = OwnerMark("m1", 4, OWNED, "i1")
    record = table.get(TP)
    who = record.claimant("m2", "i2", 6)
    assert claim_decision(who, previous, 130.0 - record.waiting_since, TIMEOUT) is Claim.WAIT
    assert claim_decision(who, previous, 160.0 - record.waiting_since, TIMEOUT) is Claim.TAKE_OVER
    released = OwnerMark("m1", 4, RELEASED, "i1")
    assert claim_decision(who, released, 0.0, TIMEOUT) is Claim.TAKE


def test_a_fenced_out_owner_waits_and_never_takes_back_what_its_restart_claimed() -> None:
    """Instance i1 of m claimed at 4 and was paused; its restart i2 claimed at 4 and fenced it. i1
    drops the partition (fenced) and waits; its claims at epoch 4 treat i2 as a stranger (a
    same-epoch claim: never taken), and at the next epoch as its own restart again."""
    table = PartitionTable()
    txn = _Producer()
    _owned(table, 4, 10, txn)
    table.drop(TP, 4, fenced=True, assigned=True, now=200.0)
    record = table.get(TP)
    assert txn.closed and record.state is PartitionState.WAITING and record.waiting_since == 200.0
    assert record.fenced_out_at == 4 and table.held(TP) is None
    restart = OwnerMark("m", 4, OWNED, "i2")
    assert claim_decision(record.claimant("m", "i1", 4), restart, 0.0, TIMEOUT) is Claim.STALE
    table.gain(TP, 250.0)  # epoch 5 still gives it: the claimant is no longer fenced
    assert claim_decision(record.claimant("m", "i1", 5), restart, 0.0, TIMEOUT) is Claim.TAKE
    assert record.waiting_since == 200.0


def test_an_unfenced_owner_refused_remembers_its_position_for_the_next_claim() -> None:
    """Unfenced, a refused member keeps its in-memory position: a claim again starts no lower."""
    table = PartitionTable()
    _owned(table, 4, 10)
    table.held(TP).position = 25
    table.drop(TP, 4, fenced=True, assigned=True, now=200.0)
    record = table.get(TP)
    assert record.remembered == 25
    assert claim_start(12, record.remembered, None) == 25  # a late member regressed it to 12
    table.start_claim(TP)
    table.finish_claim(TP, 4, 25, None, 4, assigned=True)
    assert table.held(TP).remembered is None


def test_a_drop_of_a_partition_no_longer_assigned_forgets_it() -> None:
    table = PartitionTable()
    txn = _Producer()
    _owned(table, 4, 10, txn)
    table.start_release([TP])
    table.drop(TP, 5, fenced=True, assigned=False, now=200.0)  # fenced while releasing
    assert txn.closed and table.get(TP) is None
    table.released(TP)  # the release ends: nothing left to do
    assert table.get(TP) is None


def test_close_closes_every_producer() -> None:
    table = PartitionTable()
    held, spare = _Producer(), _Producer()
    _owned(table, 4, 10, held)
    table.gain(("orders", 4), 100.0)
    table.make_spares(lambda tp: spare)
    table.close()
    assert held.closed and spare.closed and table.owned() == frozenset()
