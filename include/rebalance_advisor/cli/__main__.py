"""``python -m rebalance_advisor.cli``."""

import sys

from rebalance_advisor.cli import main

sys.exit(main())
