"""decode's progress: one bar per input, named after the file, cleared when done."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from kraft_jbod import cli
from kraft_jbod.capture import commands

CAPTURES = Path(__file__).resolve().parents[2].parent / "shared" / "captures"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_one_named_bar_per_file(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(CAPTURES.rglob("*.pcap*"))[:2]
    assert len(files) == 2, CAPTURES
    err = _Tty()
    monkeypatch.setattr(commands, "_BAR_DELAY_S", 0)
    monkeypatch.setattr("sys.stderr", err)
    assert cli.main(["decode", *map(str, files), "--summary"]) in (0, 1)
    text = err.getvalue()
    # Every bar refresh starts with a file's name: no second, nameless bar (tqdm.wrapattr made one).
    updates = [u for u in re.split(r"[\r\n]", text) if "|" in u and "%" in u]
    assert updates, text[:500]
    names = {f.name for f in files}
    assert all(any(u.lstrip().startswith(n) for n in names) for u in updates), updates[:5]
    assert {n for n in names if any(u.lstrip().startswith(n) for u in updates)} == names
