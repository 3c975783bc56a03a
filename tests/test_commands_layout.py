"""Commands where the folders say: every command module registers itself and writes only
through kraft_jbod.console."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from kraft_jbod import cli

ROOT = Path(__file__).resolve().parents[1]


def _module_path(name: str) -> Path:
    return ROOT / (name.replace(".", "/") + ".py")


def test_every_command_module_writes_only_through_console() -> None:
    for name in cli.COMMAND_MODULES:
        assert hasattr(importlib.import_module(name), "register"), name
        tree = ast.parse(_module_path(name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id != "print", f"{name}:{node.lineno} prints"
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
                inner = node.value
                if isinstance(inner.value, ast.Name) and inner.value.id == "sys" and inner.attr in ("stdout", "stderr"):
                    assert node.attr not in ("write", "flush"), f"{name}:{node.lineno} writes to sys.{inner.attr}"


def test_areas_own_their_commands() -> None:
    # demo and storage left broker/, status/faults left metrics/ (no upward import from metrics).
    assert not (ROOT / "kraft_jbod" / "metrics" / "commands.py").exists()
    broker_cmds = (ROOT / "kraft_jbod" / "broker" / "commands.py").read_text(encoding="utf-8")
    assert '"demo"' not in broker_cmds and '"storage"' not in broker_cmds
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert {"demo", "storage", "status", "faults", "topics", "codec", "decode"} <= set(sub.choices)  # type: ignore[attr-defined]
