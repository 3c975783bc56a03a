"""The one way a command talks to the terminal.

Every ``kraft-jbod`` command module writes through these functions and nothing else:
results and listening lines on stdout, errors and progress on stderr. Keeping it in one
place keeps the promises a script relies on:

* stdout carries results only (JSON lines, tables, ``listening on NAME HOST:PORT``),
  each line flushed at once so a parent process can read a port without waiting;
* every error is one line ``kraft-jbod: ...`` on stderr and exit code 2 (bad usage,
  unreadable input, a missing extra, a port in use), never a traceback;
* a command that needs an optional extra says which one, in one line.

This module imports only the standard library and :mod:`kraft_jbod.errors`, so any
layer that serves a command may use it.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Final, TextIO

from kraft_jbod.errors import KraftJbodError

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXTRAS",
    "MissingExtraError",
    "error",
    "fail",
    "host_port",
    "json_line",
    "line",
    "listening",
    "missing_extra",
    "note",
    "require",
    "stderr",
    "stdout",
    "write",
]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1  # the input was processed but something in it failed
EXIT_BAD_INPUT: Final = 2  # bad usage, unreadable input, a missing extra, an unusable port

# Top-level modules of the optional dependencies, and the extra that installs each.
EXTRAS: Final[dict[str, str]] = {
    "asyncio_dgram": "net",
    "hypothesis": "fuzz",
    "pyspark": "spark",
    "pyarrow": "spark",
    "pandas": "spark",
    "py4j": "spark",
}


class MissingExtraError(KraftJbodError):
    """A command needs an optional dependency that is not installed."""

    def __init__(self, what: str, extra: str, module: str) -> None:
        self.what = what
        self.extra = extra
        self.module = module
        super().__init__(
            f"{what} needs the {extra} extra ({module} is not installed): pip install 'kraft-jbod[{extra}]'"
        )


def stdout() -> TextIO:
    """The stream results go to (looked up each time, so tests may swap ``sys.stdout``)."""
    return sys.stdout


def stderr() -> TextIO:
    return sys.stderr


def write(text: str) -> None:
    """Raw text on stdout, flushed (for output already shaped by the caller)."""
    out = sys.stdout
    out.write(text)
    out.flush()


def line(text: str = "") -> None:
    """One result line on stdout, flushed."""
    write(text + "\n")


def json_line(obj: Any, *, indent: int | None = None) -> None:
    """One JSON document on stdout (compact unless ``indent``)."""
    if indent is None:
        line(json.dumps(obj, separators=(",", ":"), ensure_ascii=False))
    else:
        line(json.dumps(obj, indent=indent, ensure_ascii=False))


def host_port(host: str, port: int) -> str:
    """``HOST:PORT`` with IPv6 hosts in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def listening(name: str, host: str, port: int) -> None:
    """``listening on NAME HOST:PORT``: the line scripts and docs read ports from."""
    line(f"listening on {name} {host_port(host, port)}")


def note(text: str) -> None:
    """A progress or status line for people, on stderr."""
    err = sys.stderr
    err.write(text + "\n")
    err.flush()


def error(text: str) -> None:
    """``kraft-jbod: TEXT`` on stderr."""
    note(f"kraft-jbod: {text}")


def fail(text: str) -> int:
    """Report an error and return exit code 2."""
    error(text)
    return EXIT_BAD_INPUT


def missing_extra(exc: ModuleNotFoundError) -> str | None:
    """The extra that provides the module ``exc`` could not import, or None."""
    name = (exc.name or "").split(".")[0]
    return EXTRAS.get(name)


def require(what: str, *modules: str) -> None:
    """Raise :class:`MissingExtraError` unless every module in ``modules`` can be imported.

    Looks the modules up without importing them, so it costs nothing on the fast path.
    """
    import importlib.util

    for module in modules:
        if importlib.util.find_spec(module) is None:
            raise MissingExtraError(what, EXTRAS.get(module, "all"), module)
