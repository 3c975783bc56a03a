"""Layer rules: what importing the package pulls in, and the import-linter contracts."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

HEAVY = ("pyspark", "hypothesis", "asyncio", "kraft_jbod.controller.server", "kraft_jbod.analytics.job")


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    return set(out.split())


def test_import_kraft_jbod_is_light() -> None:
    loaded = _loaded_after("import kraft_jbod")
    assert not [m for m in HEAVY if m in loaded]


def test_codec_layer_is_sans_io() -> None:
    loaded = _loaded_after("import kraft_jbod.codec, kraft_jbod.codectool")
    assert not [m for m in HEAVY if m in loaded]
    # Only the message modules actually used are imported: the registry loads lazily.
    generated = [m for m in loaded if m.startswith("kraft_jbod.messages.")]
    assert 0 < len(generated) < 10


def test_import_contracts_hold() -> None:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint is not None, "import-linter is part of the test extras"
    proc = subprocess.run([lint], capture_output=True, text=True, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Contracts: " in proc.stdout and " broken" not in proc.stdout.replace("0 broken", "")
