"""``python -m kraft_jbod``: the same command line as the ``kraft-jbod`` script."""

import sys

from kraft_jbod.cli import main

sys.exit(main())
