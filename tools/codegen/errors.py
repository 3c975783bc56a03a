"""Kafka's error-code table as facts: code, name, retriable, a default message.

Source of truth is Kafka's ``Errors`` enum (``clients/.../common/protocol/Errors.java``)
and the exception class each entry builds: an entry is retriable when that class
descends from ``RetriableException``, which is how Kafka's own table decides. The
facts land in ``schemas/errors.json``; the generator turns them into the
``ErrorCode`` enum.

Messages: where Kafka's default message is a short factual phrase (at most
``SHORT_MESSAGE`` characters) it is kept as the fact it is; longer ones are written
in our own words in ``schemas/errors.json`` and survive re-extraction. A new code
with a long message makes extraction fail until someone writes one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from tools.codegen.spec import SchemaError

ERRORS_JAVA = "clients/src/main/java/org/apache/kafka/common/protocol/Errors.java"
JAVA_ROOTS = ("clients/src/main/java",)
SHORT_MESSAGE = 80

_ENTRY = re.compile(
    r"\n\s*(?P<name>[A-Z][A-Z0-9_]*)\(\s*(?P<code>-?\d+)\s*,\s*"
    r"(?P<msg>null|(?:\"(?:[^\"\\]|\\.)*\"\s*\+?\s*)+)\s*,\s*(?P<builder>[^)]*?)\)\s*[,;]"
)
_STRING = re.compile(r"\"(?:[^\"\\]|\\.)*\"")
_EXTENDS = re.compile(r"\bclass\s+(\w+)(?:<[^>]*>)?\s+extends\s+(\w+)")


@dataclass(frozen=True, slots=True)
class ErrorFact:
    code: int
    name: str
    retriable: bool
    message: str | None

    def raw(self) -> dict[str, object]:
        return {"code": self.code, "name": self.name, "retriable": self.retriable, "message": self.message}


def _superclasses(tree: Path) -> dict[str, str]:
    parents: dict[str, str] = {}
    for root in JAVA_ROOTS:
        for path in (tree / root).rglob("*.java"):
            text = path.read_text(encoding="utf-8", errors="replace")
            for child, parent in _EXTENDS.findall(text):
                parents.setdefault(child, parent)
    return parents


def _is_retriable(cls: str, parents: dict[str, str]) -> bool:
    seen: set[str] = set()
    while cls not in seen:
        if cls == "RetriableException":
            return True
        seen.add(cls)
        nxt = parents.get(cls)
        if nxt is None:
            return False
        cls = nxt
    return False


def kafka_errors(tree: Path) -> list[tuple[ErrorFact, str | None]]:
    """(fact with Kafka's own message, that message) per entry of ``Errors.java``, by code."""
    path = tree / ERRORS_JAVA
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SchemaError(f"{path}: {exc}") from None
    start = text.find("public enum Errors {")
    if start < 0:
        raise SchemaError(f"{path}: no Errors enum")
    body = text[start : text.index(";\n", start) + 2]
    parents = _superclasses(tree)
    out: list[tuple[ErrorFact, str | None]] = []
    for m in _ENTRY.finditer(body):
        msg = None if m["msg"] == "null" else "".join(json.loads(s) for s in _STRING.findall(m["msg"]))
        builder = m["builder"].strip()
        cls = builder.split("::", 1)[0] if "::" in builder else ""
        fact = ErrorFact(int(m["code"]), m["name"], bool(cls) and _is_retriable(cls, parents), msg)
        out.append((fact, msg))
    if not out:
        raise SchemaError(f"{path}: no entries found")
    return sorted(out, key=lambda pair: pair[0].code)


def load_errors(path: Path) -> list[ErrorFact]:
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SchemaError(f"{path}: {exc}") from None
    facts: list[ErrorFact] = []
    seen: set[int] = set()
    for row in rows:
        try:
            fact = ErrorFact(int(row["code"]), str(row["name"]), bool(row["retriable"]), row["message"])
        except (KeyError, TypeError, ValueError) as exc:
            raise SchemaError(f"{path}: bad entry {row!r}: {exc}") from None
        if fact.code in seen or not re.fullmatch(r"[A-Z][A-Z0-9_]*", fact.name):
            raise SchemaError(f"{path}: duplicate code or bad name in {row!r}")
        seen.add(fact.code)
        facts.append(fact)
    return facts


def merge(kafka: list[tuple[ErrorFact, str | None]], existing: list[ErrorFact]) -> list[ErrorFact]:
    """Kafka's codes, names and retriability; messages kept from ``existing`` where the
    entry is unchanged, otherwise Kafka's when short. Raises when a long one is missing."""
    ours = {(e.code, e.name): e.message for e in existing}
    merged: list[ErrorFact] = []
    missing: list[str] = []
    for fact, kafka_message in kafka:
        key = (fact.code, fact.name)
        if key in ours:
            message = ours[key]
        elif kafka_message is None or len(kafka_message) <= SHORT_MESSAGE:
            message = kafka_message
        else:
            missing.append(f"{fact.code} {fact.name}")
            message = None
        merged.append(ErrorFact(fact.code, fact.name, fact.retriable, message))
    if missing:
        raise SchemaError("write a message in errors.json for: " + ", ".join(missing))
    return merged


def errors_json(facts: list[ErrorFact]) -> str:
    rows = [json.dumps(f.raw()) for f in sorted(facts, key=lambda f: f.code)]
    return "[\n  " + ",\n  ".join(rows) + "\n]\n"
