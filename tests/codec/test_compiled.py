"""The optional mypyc-compiled primitives behave exactly as the pure-Python ones.

Builds them into a copy of the package (never into the working tree) and runs the
round-trip, the wire rules and the decoder contract against that copy in a subprocess.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tools.build_compiled import build

ROOT = Path(__file__).resolve().parents[2]

CHECK = r"""
import random, sys
from kraft_jbod.wire import primitives
assert primitives.__file__.endswith(".so"), primitives.__file__
from kraft_jbod import messages
from kraft_jbod.errors import DecodeError
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
import uuid
m = BrokerHeartbeatRequest(1, 2, 3, False, False, [uuid.UUID(int=5)], unknown_tagged_fields=((7, b"x"),))
raw = m.encode(1)
assert BrokerHeartbeatRequest.decode(raw, 1) == m
rng = random.Random(7)
checked = 0
for name in sorted(messages.BY_NAME):
    cls = messages.by_name(name)
    for v in range(cls.VALID_VERSIONS[0], cls.VALID_VERSIONS[1] + 1):
        good = cls().encode(v)
        assert cls.decode(good, v).encode(v) == good
        for _ in range(20):
            data = bytearray(good + bytes(rng.randrange(256) for _ in range(rng.randrange(8))))
            if data:
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            try:
                cls.decode(bytes(data), v)
            except DecodeError:
                pass
        checked += 1
print(checked)
"""


def test_compiled_primitives_agree(tmp_path: Path) -> None:
    copy = tmp_path / "tree"
    copy.mkdir()
    shutil.copytree(ROOT / "kraft_jbod", copy / "kraft_jbod", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    (copy / "README.md").write_text("copy\n")
    built = build(copy)
    assert any(p.name.startswith("primitives.cpython-") and p.suffix == ".so" for p in built), built
    proc = subprocess.run(
        [sys.executable, "-c", CHECK], cwd=copy, capture_output=True, text=True, check=False,
        env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert int(proc.stdout.strip()) > 700
