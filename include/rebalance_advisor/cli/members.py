"""``rebalance-advisor members add|list|remove``: the static-member registry of manual-assign groups."""

from __future__ import annotations

import argparse
import json

from rebalance_advisor.cli import DB_HELP


def register(subparsers: argparse._SubParsersAction) -> None:
    from rebalance_advisor.cli.options import add_options
    from rebalance_advisor.domain.parameters import StaticMemberParams

    members = subparsers.add_parser(
        "members",
        help="register the consumer instances of manual-assign groups (the planner plans with them)",
        description="Kafka cannot list assign() consumers: register them so the advisor plans their group.",
    )
    sub = members.add_subparsers(dest="members_command", metavar="ACTION", required=True)
    add = sub.add_parser("add", help="register one member (refused if it is registered already)")
    add_options(add, StaticMemberParams, ("group_id", "member_id", "topics", "share_keys"))
    add.add_argument("--db", default=None, help=DB_HELP)
    add.set_defaults(func=_add)
    ls = sub.add_parser("list", help="list registered members")
    ls.add_argument("--group", default=None, help="only this group (empty: no filter: all groups)")
    ls.add_argument("--format", choices=("table", "json"), default="table")
    ls.add_argument("--db", default=None, help=DB_HELP)
    ls.set_defaults(func=_list)
    rm = sub.add_parser("remove", help="unregister one member (refused if it is not registered)")
    add_options(rm, StaticMemberParams, ("group_id", "member_id"))
    rm.add_argument("--db", default=None, help=DB_HELP)
    rm.set_defaults(func=_remove)


def _add(args: argparse.Namespace) -> int:
    from rebalance_advisor.services import static_members
    from rebalance_advisor.store import db

    db.upgrade(args.db)
    member = static_members.add(args.group, args.member, args.topics, args.db, share_keys=args.share_keys)
    sharing = ", shares keys" if member.share_keys else ""
    print(
        f"registered {member.member_id} in group {member.group_id} (topics: {', '.join(member.topics)}{sharing})"
    )
    return 0


def _list(args: argparse.Namespace) -> int:
    from rebalance_advisor.services import static_members
    from rebalance_advisor.store import db

    db.require_schema(args.db)
    rows = static_members.list_members(args.group, args.db)
    if args.format == "json":
        print(json.dumps([m.to_dict() for m in rows]))
        return 0
    header = ("GROUP", "MEMBER", "TOPICS", "SHARE_KEYS", "REGISTERED")
    table = [header] + [
        (
            m.group_id,
            m.member_id,
            ",".join(m.topics),
            "yes" if m.share_keys else "no",
            m.created_at.strftime("%Y-%m-%d %H:%M:%S"),
        )
        for m in rows
    ]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for row in table:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    if not rows:
        print("(no registered members)")
    return 0


def _remove(args: argparse.Namespace) -> int:
    from rebalance_advisor.services import static_members
    from rebalance_advisor.store import db

    db.require_schema(args.db)
    member = static_members.remove(args.group, args.member, args.db)
    print(f"removed {member.member_id} from group {member.group_id}")
    return 0
