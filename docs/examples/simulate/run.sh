#!/usr/bin/env bash
# The `simulate` commands of docs/reference/simulation.md; tests/docs/test_examples.py runs this file.
set -euo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-$(mktemp -d)}
# --8<-- [start:commands]
rebalance-advisor simulate --scenario scenario.json                     # the scenario's strategy and hours
rebalance-advisor simulate --scenario scenario.json --strategy rate_aware,oracle,range \
    --seed 3 --json "$OUT/drain.json" --plot "$OUT/drain.png"            # side by side, with a plot
# --8<-- [end:commands]
