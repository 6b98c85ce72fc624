"""`python -m vlcheck.cli`: the `vlcheck` command where its console script is not on the PATH."""

import sys

from vlcheck.cli.main import main

sys.exit(main())
