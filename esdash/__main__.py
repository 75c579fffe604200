"""``python -m esdash`` runs the command line, as the ``esdash`` script does."""

import sys

from esdash.cli import main

if __name__ == "__main__":
    sys.exit(main())
