"""How a moment is read and written for people: UTC, whole seconds, the zone named.

One place for the reason texts the rules write (stored with each outcome and shown as they are)
and for the web pages, so a reason reads "until 2026-11-22 20:19:19 UTC" like every other
timestamp on the page, not "2026-11-22T20:19:19.123456+00:00".
"""

from __future__ import annotations

from datetime import UTC, datetime


def assume_utc(moment: datetime) -> datetime:
    """The one rule for a moment without a zone: it is UTC (SQLite hands timestamps back without
    one, and the plan JSON may leave it out). An aware moment is returned as it is."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def as_utc(moment: datetime) -> datetime:
    """Aware UTC datetime; naive ones are UTC (:func:`assume_utc`)."""
    return assume_utc(moment).astimezone(UTC)


def utc_whole_seconds(value: datetime | str | None) -> datetime | None:
    """A moment (datetime or ISO text) in UTC, microseconds dropped; None stays None."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return as_utc(value).replace(microsecond=0)


def timestamp_text(value: datetime | str | None) -> str:
    """ "2025-01-02 03:04:05 UTC": with its time zone, without microseconds; None -> "—"."""
    moment = utc_whole_seconds(value)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else "—"
