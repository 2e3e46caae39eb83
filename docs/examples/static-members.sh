#!/usr/bin/env bash
# Static members and the plan lifecycle, as docs/reference/cli.md and docs/protocol/static-groups.md
# show them; tests/docs/test_examples.py runs this file against a real broker and database.
# PLAN: a recommended plan of group `orders`; OTHER_PLAN: one of another group; the database is
# $REBALANCE_ADVISOR_DB_URL, the broker $KAFKA_BOOTSTRAP_SERVERS.
set -euo pipefail
: "${PLAN:?plan id}" "${OTHER_PLAN:?plan id}" "${KAFKA_BOOTSTRAP_SERVERS:?HOST:PORT}"
# --8<-- [start:commands]
rebalance-advisor members add orders worker-1 orders-in orders-retry   # a second add is refused
rebalance-advisor members list --group orders --format json
rebalance-advisor plans --group orders                                  # find the plan id
rebalance-advisor plan-status approve "$PLAN" --actor alice             # add --publish to publish at once
rebalance-advisor plan-status publish "$PLAN"                           # [--config client.properties] [--topic NAME]
rebalance-advisor plan-status show "$PLAN"                              # status and transitions
rebalance-advisor plan-status reject "$OTHER_PLAN" --note "too many moves"
rebalance-advisor members remove orders worker-1                        # an unknown member is refused
# --8<-- [end:commands]
