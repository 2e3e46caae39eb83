"""Short torture runs of the client helper (the long ones: bench/torture.py).

Four worker processes, a producer of sequence-numbered records, a plan every 2-5 s (sometimes two
a few ms apart), pauses (some longer than the takeover timeout, some aimed between a read and its
write), kills and restarts (fenced: inside a transaction, between sending the offsets and
committing), with the clients' default transaction timeout (60 s); then the checker reads the
group's whole commit history from __consumer_offsets, every worker's processing log and the output
topic. Broker restarts: the long run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.torture import Config, OwnBroker, Run

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.torture]


@pytest.fixture(scope="module")
def own_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnBroker]:
    """A broker this module may restart (the session's broker is shared by other tests)."""
    broker = OwnBroker(tmp_path_factory.mktemp("torture-kafka"))
    try:
        yield broker
    finally:
        broker.stop()


def _examples(result: dict) -> dict:
    """The non-empty example lists (a failure message shows what went wrong, not empty lists)."""
    return {kind: found for kind, found in result["examples"].items() if found}


def _run(config: Config, broker: OwnBroker, tmp_path: Path) -> dict:
    result = Run(config, broker.bootstrap, broker, tmp_path).execute()
    print(json.dumps(result, indent=1))
    assert result["worker_exit_codes"] and set(result["worker_exit_codes"].values()) == {0}
    # every kind of fault ran: pauses longer than the takeover timeout, pauses aimed between a
    # read and its write, kills, and epochs changing under it
    assert result["pauses_longer_than_timeout"] > 0, "no pause outlasted the takeover timeout"
    assert result["aimed_pauses"] > 0 and result["kills"] > 0 and result["publishes"] >= 5
    assert result["lost"] == 0
    assert result["committed_offset_regressions"] == 0 or not config.fenced, _examples(result)
    # no duplicate is left unexplained by a fault: none in a normal handover, in either mode
    assert result["duplicates"].get("normal_handover", 0) == 0, (result["duplicates"], _examples(result))
    # liveness (stalls, kills inside a transaction) is reported, not asserted: at load 38 the
    # broker's transaction coordinator alone timed out commits for 70 s. The takeover of a member
    # killed inside a transaction is asserted by test_client_liveness.py, the targets measured by
    # bench/torture.py (docs/protocol/liveness.md)
    print(f"stall max {result['stall_max_s']} s, kills inside a transaction {result['kills_in_transaction']}")
    return result


def test_fenced_mode_under_combined_faults(own_broker: OwnBroker, tmp_path: Path) -> None:
    """15 s of pauses, kills and plans, fenced.

    Broker restarts are left to the long run (bench/torture.py): on this loaded 2-core machine
    the coordinators took 30-50 s to answer again after one, longer than the rest of the test.
    """
    config = Config(
        "fenced-short",
        fenced=True,
        duration=15,
        plan_every=(1.5, 3.0),
        pause_every=(1.5, 3.5),
        kill_every=(5.0, 8.0),
        first_self_pause=20,
        in_transaction_kills=1.0,
        fault_grace=45.0,
    )
    result = _run(config, own_broker, tmp_path)
    assert result["fences_of_rightful_owners"] == 0, _examples(result)
    assert result["outputs_lost"] == 0
    assert result["commits_accepted_from_fenced_members"] == 0, _examples(result)
    assert result["commits_from_superseded_owners"] == 0, _examples(result)
    assert result["owned_commits_not_in_writers_latest_epoch"] == 0, _examples(result)
    assert result["output_duplicates"] == 0
    assert result["final_commit_below_end"] == 0


def test_unfenced_mode_under_pauses_and_kills(own_broker: OwnBroker, tmp_path: Path) -> None:
    """15 s of pauses, kills and plans without fencing (no broker restart)."""
    config = Config(
        "unfenced-short",
        fenced=False,
        duration=15,
        plan_every=(1.5, 3.0),
        pause_every=(1.5, 3.5),
        kill_every=(5.0, 8.0),
        first_self_pause=20,
        in_transaction_kills=0.0,  # no transactions
        fault_grace=45.0,
    )
    result = _run(config, own_broker, tmp_path)
    # The skipped-epoch flaw is gone: no member writes over a newer claim because it skipped epochs.
    assert result["superseded_by_cause"].get("skipped_epochs", 0) == 0, _examples(result)
    # Regressions and overwrites from a pause (or a slow read) between the freshness check and the
    # write remain possible without fencing: reported (stale_read), not asserted away.
