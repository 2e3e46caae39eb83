#!/usr/bin/env bash
# The `plan` commands of docs/reference/plan-format.md; tests/docs/test_examples.py runs this file.
set -euo pipefail
cd "$(dirname "$0")"
# --8<-- [start:commands]
rebalance-advisor plan --input group.json --strategy lag_aware                      # JSON, as below
rebalance-advisor plan --input group.json --strategy lag_aware --format table
rebalance-advisor plan --input - --strategy rate_aware_sticky --option min_gain=0.05 < group.json
# --8<-- [end:commands]
