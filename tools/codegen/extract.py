"""Turn Kafka's own schema sources into facts-only schema files for ``schemas/``.

Input: a Kafka source tree (its ``clients/.../common/message`` and
``metadata/.../common/metadata`` folders are found automatically), a kafka-clients
jar (``common/message/*.json`` inside it), or plain folders of schema files.
Output: one file per schema holding only wire facts (names, types, versions,
tags, nullability, defaults, ignorable, mapKey, ...) in a stable layout; Kafka's
comments and ``about`` texts are dropped. With ``--errors FILE`` a source tree
also refreshes that errors.json (Kafka's error table, see ``tools/codegen/errors.py``). A new Kafka release then becomes
``python -m tools.codegen.extract <src> --out schemas`` plus a regeneration.

Usage: ``python -m tools.codegen.extract SRC [SRC ...] --out DIR [--kafka-version V] [--errors FILE]``
"""

from __future__ import annotations

import argparse
import json
import sys
import zipfile
from pathlib import Path

from tools.codegen import errors as error_facts
from tools.codegen.spec import MessageSpec, SchemaError, parse_schema

# category -> folders of a Kafka source tree (raft's QuorumStateData joins the messages)
TREE_FOLDERS = {
    "message": ("clients/src/main/resources/common/message", "raft/src/main/resources/common/message"),
    "metadata": ("metadata/src/main/resources/common/metadata",),
}


def facts_json(spec: MessageSpec) -> str:
    return json.dumps(spec.raw(), indent=2) + "\n"


def _from_dir(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.json"))}


def gather(src: Path) -> dict[str, dict[str, str]]:
    """Schema texts by category ("message" / "metadata") and file name."""
    if src.is_file() and src.suffix == ".jar":
        out: dict[str, str] = {}
        with zipfile.ZipFile(src) as jar:
            for name in jar.namelist():
                if name.startswith("common/message/") and name.endswith(".json"):
                    out[Path(name).name] = jar.read(name).decode("utf-8")
        return {"message": out}
    if (src / TREE_FOLDERS["message"][0]).is_dir():
        out_tree: dict[str, dict[str, str]] = {}
        for cat, rels in TREE_FOLDERS.items():
            for rel in rels:
                if (src / rel).is_dir():
                    out_tree.setdefault(cat, {}).update(_from_dir(src / rel))
        return out_tree
    if src.is_dir():
        return {src.name: _from_dir(src)}
    raise SchemaError(f"{src}: not a Kafka source tree, a jar or a schema folder")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.codegen.extract", description=__doc__)
    ap.add_argument("sources", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--kafka-version", help="recorded in OUT/KAFKA_VERSION")
    ap.add_argument("--errors", type=Path, help="refresh this errors.json from a source tree's Errors table")
    args = ap.parse_args(argv)
    count = 0
    try:
        for src in args.sources:
            for category, texts in gather(src).items():
                target = args.out / category
                target.mkdir(parents=True, exist_ok=True)
                for name, text in texts.items():
                    spec = parse_schema(text, source=name)
                    (target / name).write_text(facts_json(spec), encoding="utf-8")
                    count += 1
        for src in args.sources if args.errors else ():
            if (src / error_facts.ERRORS_JAVA).is_file():
                # Kafka's error table: codes, names and retriability from the source,
                # messages kept from our errors.json (see tools/codegen/errors.py).
                target = args.errors
                existing = error_facts.load_errors(target) if target.is_file() else []
                merged = error_facts.merge(error_facts.kafka_errors(src), existing)
                target.write_text(error_facts.errors_json(merged), encoding="utf-8")
                count += 1
    except (SchemaError, OSError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        print(f"extract: {exc}", file=sys.stderr)
        return 2
    if args.kafka_version:
        (args.out / "KAFKA_VERSION").write_text(args.kafka_version + "\n", encoding="utf-8")
    print(f"extract: wrote {count} facts-only schema files under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
