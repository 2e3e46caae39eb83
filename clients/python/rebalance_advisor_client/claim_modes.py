"""What differs between fenced and unfenced mode, behind one interface chosen once per consumer.

:class:`AssignedConsumer` runs the handover (epochs, the partition states of partition_states.py,
the claim's common steps) and hands each step whose guarantee differs to its mode:
``fenced_mode.FencedMode`` (a transactional producer per partition: claims fence, commits are
transactions, claims run on threads of their own) or ``unfenced_mode.UnfencedMode`` (owner marks
read before every write, claims in turn on the caller's thread). docs/protocol/states.md, "Modes".
"""

from __future__ import annotations

from typing import Any, Protocol

from rebalance_advisor_client.assignment_records import TopicPartitionKey
from rebalance_advisor_client.claim_runner import ClaimInput, ClaimOutcome
from rebalance_advisor_client.partition_states import PartitionRecord


class HandoverMode(Protocol):
    """One mode's commits, releases and claims; each method runs on the caller's thread unless said."""

    def commit(self) -> dict[TopicPartitionKey, int]:
        """Commit the processed positions of held partitions; returns what was written."""

    def retry_commits(self) -> None:
        """Retry commits that failed retriably (their partitions are paused meanwhile)."""

    def revalidate(self, tps: list[TopicPartitionKey]) -> None:
        """Check that we still hold ``tps`` (after a pause, or skipped epochs); drop the lost ones."""

    def release(self, tps: list[TopicPartitionKey]) -> list[TopicPartitionKey]:
        """Commit ``tps`` (unassigned, RELEASING) with a released mark; returns the released ones."""

    def begin(self, tp: TopicPartitionKey, record: PartitionRecord) -> bool:
        """A record of ``tp`` is about to be handed out: open what its outputs ride on; False: skip it."""

    def produce(self, message: Any, topic: str, value: Any, key: Any, **kwargs: Any) -> None:
        """Send an output with ``message``'s partition's next commit."""

    def group_metadata(self) -> Any:
        """What claim transactions need of the polled consumer (None when there are none)."""

    def launch(self, claim: ClaimInput) -> bool:
        """Run or start ``claim``; False: start no more now (a newer epoch arrived meanwhile)."""

    def hint_reader(self, claim: ClaimInput) -> Any:
        """The reader of the mark that decides whether to claim (a claim's first step)."""

    def finish(
        self, claim: ClaimInput, committed: int | None, read_at: float, outcome: ClaimOutcome
    ) -> ClaimOutcome:
        """A claim that may take its partition: write the claim (on the claim's thread)."""

    def warm_up(self) -> None:
        """Prepare what the waiting partitions' claims will need (before they start)."""

    def unanswered(self, error: BaseException) -> bool:
        """A claim's read was not answered: handled here (True), or only logged by the caller."""
