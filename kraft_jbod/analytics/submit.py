"""Driver script for ``spark-submit``: ``spark-submit [options] .../kraft_jbod/analytics/submit.py INPUT... --out DIR``.

It runs ``kraft-jbod stats`` with the given arguments inside the session spark-submit
created (the job sets ``local[*]`` only when it runs embedded). Invariant: it adds nothing
to the command's behaviour; the exit code is the command's.
"""

from __future__ import annotations

import sys

from kraft_jbod.cli import main

if __name__ == "__main__":
    sys.exit(main(["stats", *sys.argv[1:]]))
