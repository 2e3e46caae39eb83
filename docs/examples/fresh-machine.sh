#!/usr/bin/env bash
# The two commands for a fresh machine (README.md, docs/getting-started.md). tests/docs/test_examples.py
# checks that each make target named here exists (`make -n`); running them is the CI run itself.
set -euo pipefail
# --8<-- [start:commands]
make demo   # local broker + demo workload -> snapshot DAG twice -> advisor DAG (Spark local, SQLite) -> lag, plans, the live group before and after its plan
make test   # ruff, the docs site (mkdocs --strict), then the whole test suite against a real broker, SQLite and PostgreSQL
# --8<-- [end:commands]
