"""``kraft-jbod``: the command line. Parses argv and dispatches; nothing else.

The parser is built from per-area command modules, each with ``register(sub)`` adding
its subcommands and handlers that return an exit code; they write to the terminal only
through :mod:`kraft_jbod.console`. Heavy imports happen inside the handlers, so
``kraft-jbod --help`` stays light.

Start-up rule: a run registers only the module of the command it names (argv's first
word; the top-level parser has no option taking a value, so that word is the command),
and ``kraft-jbod --version`` registers none. Building all the subparsers costs more CPU
than most short commands' work; ``--help``, a missing or unknown command build them all,
so usage and error messages list every command. ``COMMAND_MODULES`` says which commands
each module adds (a test checks it against ``register``), and the codec backend that
``--version`` reports is found without importing the codec (:func:`kraft_jbod._accel.current`).

Exit codes: 0 success, 1 the input was processed but something in it failed (e.g. a
frame that does not decode), 2 bad usage, unreadable input, a missing extra or a port
in use, or out of memory (one ``kraft-jbod: ...`` line, never a traceback), 130 interrupted.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

from kraft_jbod import console
from kraft_jbod.errors import KraftJbodError

Handler = Callable[[argparse.Namespace], int]

# Where each command lives: the module of the area whose code it drives, and the
# top-level commands its register(sub) adds (in --help order).
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "kraft_jbod.codectool": ("codec",),  # codec decode | roundtrip
    "kraft_jbod.capture.commands": ("decode", "capture"),  # decode, capture listen
    "kraft_jbod.controller.commands": ("controller", "log"),  # controller, log dump | recover
    "kraft_jbod.controller.admin_commands": ("status", "faults", "topics"),
    "kraft_jbod.controller.raft.commands": ("quorum",),  # quorum failover | simulate
    "kraft_jbod.broker.commands": ("broker", "broker-ctl"),
    "kraft_jbod.storage.commands": ("storage",),  # storage format | info
    "kraft_jbod.demo.commands": ("demo",),
    "kraft_jbod.fuzz.commands": ("fuzz",),
    "kraft_jbod.analytics.commands": ("stats",),
    "kraft_jbod.realkafka.commands": ("real-cluster",),
}
_MODULE_OF = {command: module for module, commands in COMMAND_MODULES.items() for command in commands}


class _VersionAction(argparse.Action):
    """``--version``: the package version and which codec backend is active (c or python)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        import kraft_jbod

        console.line(f"kraft-jbod {kraft_jbod.__version__} (codec: {kraft_jbod.codec_backend()})")
        parser.exit()


def modules_for(argv: Sequence[str]) -> tuple[str, ...]:
    """The command modules a run with ``argv`` needs registered (see the module docstring)."""
    for arg in argv:
        if not arg.startswith("-"):
            module = _MODULE_OF.get(arg)
            return (module,) if module is not None else tuple(COMMAND_MODULES)
        if arg == "-h" or (len(arg) > 2 and "--help".startswith(arg)):  # argparse takes --he too
            return tuple(COMMAND_MODULES)
    # Only options: --version exits while parsing, and anything else is an error whose
    # message does not list the commands.
    return () if argv else tuple(COMMAND_MODULES)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser with every command, or with only those ``argv`` needs when it is given."""
    ap = argparse.ArgumentParser(prog="kraft-jbod", description="Kafka KRaft + KIP-858 (JBOD) toolkit.")
    ap.add_argument("--version", action=_VersionAction, help="print the version and the active codec, then exit")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES if argv is None else modules_for(argv):
        importlib.import_module(name).register(sub)
    return ap


def _command_name(args: argparse.Namespace) -> str:
    words = [args.command]
    for attr in ("codec_command", "capture_command", "log_command", "storage_command", "topics_command"):
        value = getattr(args, attr, None)
        if value:
            words.append(value)
    return " ".join(words)


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    handler: Handler = args.func
    try:
        return handler(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except KraftJbodError as exc:
        return console.fail(str(exc))
    except MemoryError:
        # Decoders bound what they build (see capture/budget.py); this is the last line of
        # defence for whatever still did not fit: one line, nothing half-written kept.
        return console.fail(
            f"{_command_name(args)}: out of memory; for decode, lower --max-frame-records / --max-frame-bytes"
        )
    except ModuleNotFoundError as exc:
        extra = console.missing_extra(exc)
        if extra is None:
            raise
        return console.fail(str(console.MissingExtraError(_command_name(args), extra, exc.name or "?")))
    except OSError as exc:
        # Only what a user causes; anything else is a bug and keeps its traceback.
        if exc.errno in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES, errno.ECONNREFUSED):
            return console.fail(f"{_command_name(args)}: {exc.strerror or exc}")
        raise


if __name__ == "__main__":
    sys.exit(main())
