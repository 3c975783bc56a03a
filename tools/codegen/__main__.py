"""``python -m tools.codegen [--check] [--schemas DIR ...] [--out DIR]``.

Default: compile ``schemas/message`` and ``schemas/metadata`` into
``kraft_jbod/messages``. ``--check`` regenerates in memory and exits 1 listing any
generated file that differs from what is checked in.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tools.codegen.compile import compile_dirs, diff_tree, write_tree
from tools.codegen.spec import SchemaError

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SCHEMAS = [ROOT / "schemas" / "message", ROOT / "schemas" / "metadata"]
DEFAULT_OUT = ROOT / "kraft_jbod" / "messages"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.codegen", description=__doc__)
    ap.add_argument("--schemas", type=Path, action="append", help="schema directory (repeatable)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output package directory")
    ap.add_argument("--check", action="store_true", help="fail if the checked-in output is stale")
    args = ap.parse_args(argv)
    dirs = args.schemas or DEFAULT_SCHEMAS
    try:
        files = compile_dirs(dirs)
    except SchemaError as exc:
        print(f"codegen: {exc}", file=sys.stderr)
        return 2
    if args.check:
        problems = diff_tree(files, args.out)
        for p in problems:
            print(f"codegen --check: {p}", file=sys.stderr)
        if problems:
            print("run `python -m tools.codegen` and commit the result", file=sys.stderr)
            return 1
        print(f"codegen --check: {len(files)} generated files up to date")
        return 0
    write_tree(files, args.out)
    print(f"codegen: wrote {len(files)} files to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
