"""The corpus of interesting inputs and the findings directory, both plain files.

Strategy:

* A black-box server gives no coverage, so "interesting" means a new *behaviour
  signature*: (api key, api version, outcome class, error code, first operator). The
  first case showing a signature is kept; later ones are not. Entries are mutated again
  by later runs (``CaseFactory`` re-traces those that still decode).
* One JSON file per entry (``<sha1-prefix>.json``: hex plus how it was made), so corpora
  from several runs merge by copying files and duplicates share a name. Loading
  skips files that are not ours (bad JSON, bad hex) and says how many it skipped.
* Findings go to ``<findings>/<outcome>-s<seed>-i<index>.json``: the bytes as hex,
  the decoded JSON of every frame, the preceding cases on the same connection, the
  minimized bytes when known, and the command that replays it.

Invariant: nothing here talks to the network; writes are to a temporary name, then
renamed, so a killed run leaves no half-written entry.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from kraft_jbod.fuzz import mutators
from kraft_jbod.fuzz.runner import Case, Finding, Result


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def signature(case: Case, result: Result) -> tuple[Any, ...]:
    op = case.ops[0] if case.ops else case.origin
    return (case.api_key, case.api_version, str(result.outcome), result.error_code, op)


class Corpus:
    """Interesting inputs kept in ``directory`` (created if missing); ``max_entries`` bounds it."""

    def __init__(self, directory: str | Path | None, *, max_entries: int = 5000) -> None:
        self.directory = Path(directory) if directory is not None else None
        self.max_entries = max_entries
        self.entries: list[bytes] = []
        self._seen: set[tuple[Any, ...]] = set()
        self._names: set[str] = set()  # content hashes: the same bytes are kept once
        self.skipped = 0
        self.added = 0
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._load()

    def _load(self) -> None:
        assert self.directory is not None
        for path in sorted(self.directory.glob("*.json")):
            try:
                obj = json.loads(path.read_text(encoding="utf-8"))
                data = bytes.fromhex(obj["hex"])
                sig = tuple(obj.get("signature") or ())
            except (OSError, ValueError, KeyError, TypeError):
                self.skipped += 1
                continue
            name = hashlib.sha1(data).hexdigest()[:16]
            if name in self._names:
                continue
            self._names.add(name)
            self.entries.append(data)
            if sig:
                self._seen.add(sig)

    def consider(self, case: Case, result: Result) -> bool:
        """Keep ``case`` when its behaviour signature is new; True when kept."""
        sig = signature(case, result)
        if sig in self._seen or len(self.entries) >= self.max_entries:
            return False
        self._seen.add(sig)
        name = hashlib.sha1(case.data).hexdigest()[:16]
        if name in self._names:
            return False
        self._names.add(name)
        self.entries.append(case.data)
        self.added += 1
        if self.directory is not None:
            _write_json(
                self.directory / f"{name}.json",
                {
                    "hex": case.data.hex(),
                    "signature": list(sig),
                    "seed": case.seed,
                    "index": case.index,
                    "ops": case.ops,
                    "outcome": str(result.outcome),
                    "detail": result.detail,
                },
            )
        return True


def finding_record(finding: Finding, target: str, where: str | None = None) -> dict[str, Any]:
    """The JSON of a finding: enough to replay it byte for byte or regenerate it from its seed."""
    case = finding.case
    rec: dict[str, Any] = {
        "outcome": str(finding.outcome),
        "detail": finding.detail,
        "seed": case.seed,
        "index": case.index,
        "origin": case.origin,
        "ops": case.ops,
        "api_key": case.api_key,
        "api_version": case.api_version,
        "hex": case.data.hex(),
        "frames": mutators.describe(case.data),
        "history_hex": [h.hex() for h in finding.history],
        "regenerate": f"kraft-jbod fuzz {where or '--target ' + target} --seed {case.seed} "
        f"--start-index {case.index} --count 1",
        **finding.extra,
    }
    if finding.suspects:
        rec["suspects_hex"] = [c.data.hex() for c in finding.suspects[-16:]]
    if finding.minimized is not None:
        rec["minimized_hex"] = finding.minimized.hex()
        rec["minimized_frames"] = mutators.describe(finding.minimized)
    return rec


def save_finding(directory: str | Path, finding: Finding, target: str, where: str | None = None) -> Path:
    """Write one finding as JSON; ``where`` is how the replay command names the target
    (``--spawn-controller``, ``--spawn CMD``...; default ``--target TARGET``), so a finding
    from a spawned target replays against a new one, not the dead ephemeral port."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{finding.outcome}-s{finding.case.seed}-i{finding.case.index}.json"
    rec = finding_record(finding, target, where)
    rec["replay"] = f"kraft-jbod fuzz {where or '--target ' + target} --replay {path}"
    _write_json(path, rec)
    return path


def load_finding_bytes(path: str | Path, *, minimized: bool = True) -> bytes:
    """The bytes of a saved finding (the minimized ones when present and asked for).

    Raises:
        ValueError: not a finding file.
    """
    try:
        obj = json.loads(Path(path).read_text(encoding="utf-8"))
        if minimized and obj.get("minimized_hex"):
            return bytes.fromhex(obj["minimized_hex"])
        return bytes.fromhex(obj["hex"])
    except (OSError, KeyError, TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not a finding file: {exc}") from None
