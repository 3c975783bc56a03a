"""``kraft-jbod``: the command line. Parses argv and dispatches; nothing else.

The parser is built from per-area command modules, each with ``register(sub)`` adding
its subcommands and handlers that return an exit code; they write to the terminal only
through :mod:`kraft_jbod.console`. Heavy imports happen inside the handlers, so
``kraft-jbod --help`` stays light.

Exit codes: 0 success, 1 the input was processed but something in it failed (e.g. a
frame that does not decode), 2 bad usage, unreadable input, a missing extra or a port
in use (one ``kraft-jbod: ...`` line, never a traceback), 130 interrupted.
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

# Where each command lives: the module of the area whose code it drives.
COMMAND_MODULES = (
    "kraft_jbod.codectool",  # codec decode | roundtrip
    "kraft_jbod.capture.commands",  # decode, capture listen
    "kraft_jbod.controller.commands",  # controller, log dump
    "kraft_jbod.controller.admin_commands",  # status, faults, topics
    "kraft_jbod.broker.commands",  # broker, broker-ctl
    "kraft_jbod.storage.commands",  # storage format | info
    "kraft_jbod.demo.commands",  # demo
    "kraft_jbod.fuzz.commands",  # fuzz
    "kraft_jbod.analytics.commands",  # stats
    "kraft_jbod.realkafka.commands",  # real-cluster
)


class _VersionAction(argparse.Action):
    """``--version``: the package version and which codec backend is active (c or python)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        import kraft_jbod

        console.line(f"kraft-jbod {kraft_jbod.__version__} (codec: {kraft_jbod.codec_backend()})")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kraft-jbod", description="Kafka KRaft + KIP-858 (JBOD) toolkit.")
    ap.add_argument("--version", action=_VersionAction, help="print the version and the active codec, then exit")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
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
    parser = build_parser()
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
