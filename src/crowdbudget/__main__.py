"""``python -m crowdbudget`` runs the command-line tool."""

import sys

from crowdbudget.cli import main

sys.exit(main())
