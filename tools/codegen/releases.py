"""Which Kafka releases speak which API versions: ``schemas/releases.json``.

Facts, per release from 0.8.0 to 4.3: the version range of each API key a broker of
that release advertises in its ApiVersions response. They come from kafka-python
3.0.12's table of brokers' ApiVersions answers (``kafka.protocol.broker_version_data``,
recorded from real brokers), with one correction: from 4.0 on, versions below the
4.4 schema's lowest valid version are left out. KIP-896 removed them in 4.0, but a
4.x broker still advertises Produce v0-2 (so that old clients fail with
UNSUPPORTED_VERSION rather than not connect) while no 4.x schema defines them.
Kafka 4.4 itself comes from our 4.4 schema source: every valid version except a
``latestVersionUnstable`` one.

Controller-only APIs (BrokerRegistration, Vote, ...) are not advertised by brokers, so
they have no release rows; ``codec decode`` then names the schema source instead.

``python -m tools.codegen.releases`` rewrites the file (needs kafka-python).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tools.codegen.spec import MessageSpec, SchemaError, load_dir

ROOT = Path(__file__).resolve().parents[2]
RELEASES_FILE = "releases.json"
NEWEST_SOURCE = ROOT / "schemas" / "sources" / "kafka-4.4" / "message"
NEWEST_LABEL = "4.4"
KIP_896_RELEASE = (4, 0)


def _label(release: tuple[int, ...]) -> str:
    return ".".join(str(x) for x in release)


def build(table: dict[tuple[int, ...], dict[int, tuple[int, int]]], newest: list[MessageSpec]) -> dict[str, object]:
    requests = {s.api_key: s for s in newest if s.type == "request" and s.api_key is not None}
    floor = {k: s.valid_versions.lo for k, s in requests.items() if not s.valid_versions.empty}
    releases: list[str] = []
    apis: dict[int, list[list[object]]] = {}
    for release in sorted(table):
        label = _label(release)
        releases.append(label)
        for key, (lo, hi) in sorted(table[release].items()):
            if release >= KIP_896_RELEASE and key in floor:
                lo = max(lo, floor[key])
            if lo <= hi:
                apis.setdefault(key, []).append([label, lo, hi])
    releases.append(NEWEST_LABEL)
    for key, spec in sorted(requests.items()):
        vv = spec.valid_versions
        if vv.empty:
            continue
        hi = vv.hi - 1 if spec.latest_version_unstable else vv.hi
        if vv.lo <= hi:
            apis.setdefault(key, []).append([NEWEST_LABEL, vv.lo, hi])
    return {
        "releases": releases,
        "apis": {str(k): rows for k, rows in sorted(apis.items())},
    }


def releases_json(data: dict[str, object]) -> str:
    apis = data["apis"]
    assert isinstance(apis, dict)
    lines = ["{", f'  "releases": {json.dumps(data["releases"])},', '  "apis": {']
    keys = list(apis)
    for i, k in enumerate(keys):
        rows = ", ".join(json.dumps(r) for r in apis[k])
        lines.append(f'    "{k}": [{rows}]' + ("," if i < len(keys) - 1 else ""))
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def load_releases(path: Path) -> tuple[list[str], dict[int, list[tuple[str, int, int]]]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        releases = [str(r) for r in data["releases"]]
        apis = {int(k): [(str(r), int(lo), int(hi)) for r, lo, hi in rows] for k, rows in data["apis"].items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SchemaError(f"{path}: {exc}") from None
    for rows in apis.values():
        for r, lo, hi in rows:
            if r not in releases or lo > hi:
                raise SchemaError(f"{path}: bad row {r} {lo}-{hi}")
    return releases, apis


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.codegen.releases", description=__doc__)
    ap.add_argument("--out", type=Path, default=ROOT / "schemas" / RELEASES_FILE)
    args = ap.parse_args(argv)
    try:
        from kafka.protocol.broker_version_data import BROKER_API_VERSIONS
    except ImportError:
        print("releases: needs kafka-python (pip install kafka-python==3.0.12)", file=sys.stderr)
        return 2
    data = build(BROKER_API_VERSIONS, load_dir(NEWEST_SOURCE))
    args.out.write_text(releases_json(data), encoding="utf-8")
    print(f"releases: wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
