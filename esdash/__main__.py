"""``python -m esdash`` runs the command line, as the ``esdash`` script does."""

import sys

from esdash.cli import main

sys.exit(main())
