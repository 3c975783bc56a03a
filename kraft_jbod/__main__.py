"""``python -m kraft_jbod``: the same command line as the ``kraft-jbod`` script.

Useful where the console script is not on PATH or points at another checkout (a work tree
run with ``PYTHONPATH``), and for measuring a whole command under ``/usr/bin/time``.
"""

import sys

from kraft_jbod.cli import main

sys.exit(main())
