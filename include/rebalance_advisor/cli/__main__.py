"""``python -m rebalance_advisor.cli``."""

import sys

from rebalance_advisor.cli import console_main

sys.exit(console_main())
