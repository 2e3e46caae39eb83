"""``plan --strategy key_range``: the key-range plan document as a table for a person."""

from __future__ import annotations

from typing import Any


def format_key_range_table(plan: dict[str, Any]) -> str:
    """One row per member (load, whole partitions, key ranges), then the reason."""
    rows = [("member", "load", "assigned")]
    for member, parts in plan["assignment"].items():
        listed = ", ".join(
            f"{p[0]}-{p[1]}" if len(p) == 2 else f"{p[0]}-{p[1]}[{p[2]},{p[3]})" for p in parts
        )
        rows.append((member, f"{plan['member_load'][member]:g}", listed or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    lines = [f"group {plan['group_id']}  strategy {plan['strategy']}", ""]
    for i, row in enumerate(rows):
        lines.append(f"{row[0]:<{widths[0]}}  {row[1]:>{widths[1]}}  {row[2]}".rstrip())
        if i == 0:
            lines.append("-" * (sum(widths) + 4 + len("assigned")))
    lines += ["", f"reason: {plan['reason']}"]
    return "\n".join(lines)
