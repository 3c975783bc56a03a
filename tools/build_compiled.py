"""Optionally compile the codec's hot primitives with mypyc; the pure-Python path stays.

``python -m tools.build_compiled`` builds ``kraft_jbod/wire/primitives`` as a C extension
next to its ``.py`` (Python then imports the extension); ``--clean`` removes it again.
Everything works without it; the benchmark (tools/bench/bench_codec.py) reports which
path it measured.

Why only the primitives: the generated message modules hold slots dataclasses deriving
from interpreted base classes, which mypyc cannot compile as they are, and compiling
all 212 of them would take many minutes. The primitives (varints, strings, arrays,
uuids, tagged sections) are where small messages spend most of their time.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULES = ["kraft_jbod/wire/primitives.py"]


def built_extensions(root: Path = ROOT) -> list[Path]:
    out: list[Path] = []
    for module in MODULES:
        stem = (root / module).with_suffix("")
        out += sorted(stem.parent.glob(f"{stem.name}*.so"))
    return out


def clean(root: Path = ROOT) -> None:
    for path in built_extensions(root):
        path.unlink()
    shutil.rmtree(root / "build", ignore_errors=True)


def build(root: Path = ROOT) -> list[Path]:
    """Compile in place under ``root``. Raises subprocess.CalledProcessError on failure."""
    mypyc = Path(sys.executable).with_name("mypyc")
    subprocess.run([str(mypyc), *MODULES], cwd=root, check=True, capture_output=True, text=True)
    shutil.rmtree(root / "build", ignore_errors=True)
    return built_extensions(root)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.build_compiled", description=__doc__)
    ap.add_argument("--clean", action="store_true", help="remove the compiled extension")
    args = ap.parse_args(argv)
    if args.clean:
        clean()
        print("removed the compiled primitives; the pure-Python path is in use")
        return 0
    try:
        paths = build()
    except subprocess.CalledProcessError as exc:
        print(f"mypyc failed:\n{exc.stdout}\n{exc.stderr}", file=sys.stderr)
        return 1
    for p in paths:
        print(f"built {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
