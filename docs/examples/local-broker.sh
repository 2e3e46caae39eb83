#!/usr/bin/env bash
# The local broker's commands, as docs/getting-started.md shows them; tests/docs/test_examples.py
# runs this file (REBALANCE_ADVISOR_HOME set to a temporary directory, PORT to a free port).
set -euo pipefail
PORT=${PORT:-19092}
# --8<-- [start:commands]
rebalance-advisor dev kafka fetch            # jars into the cache (once; a partial download is discarded)
rebalance-advisor dev kafka start --port "$PORT"   # without --port: a free port
rebalance-advisor dev kafka status
rebalance-advisor dev kafka consumer-groups  # Kafka's own kafka-consumer-groups --describe --all-groups
rebalance-advisor dev kafka stop
# --8<-- [end:commands]
