"""``kraft-jbod``: the command line. The only module that parses argv, prints or exits.

Exit codes: 0 success, 1 the input was processed but something in it failed
(e.g. a frame that does not decode), 2 bad usage or unreadable input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from kraft_jbod.errors import KraftJbodError

Handler = Callable[[argparse.Namespace], int]


def _print_json(obj: Any, out: TextIO | None = None) -> None:
    (out or sys.stdout).write(json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n")


def _fail(msg: str) -> int:
    print(f"kraft-jbod: {msg}", file=sys.stderr)
    return 2


# --------------------------------------------------------------------------- codec


def cmd_codec_decode(args: argparse.Namespace) -> int:
    from kraft_jbod import codectool

    text = args.hex
    if text == "-":
        text = sys.stdin.read()
    try:
        data = codectool.parse_hex(text)
    except ValueError as exc:
        return _fail(str(exc))
    kind = "request_header" if args.kind == "header" else args.kind
    try:
        result = codectool.decode_command(
            data, kind=kind, api_key=args.api_key, version=args.version, framed=args.framed
        )
    except KraftJbodError as exc:
        _print_json(
            {"error": str(exc), "field_path": getattr(exc, "field_path", ""), "offset": getattr(exc, "offset", None)}
        )
        return 1
    print(json.dumps(result, indent=None if args.compact else 2, ensure_ascii=False))
    return 0


def cmd_codec_roundtrip(args: argparse.Namespace) -> int:
    from kraft_jbod import codectool

    tally = codectool.RoundtripTally()
    try:
        stream: TextIO = sys.stdin if args.file == "-" else open(args.file, encoding="utf-8")
    except OSError as exc:
        return _fail(f"cannot read {args.file}: {exc.strerror}")
    with stream:
        try:
            for result in codectool.roundtrip_lines(stream, tally):
                _print_json(result)
        except UnicodeDecodeError as exc:
            return _fail(f"{args.file} is not UTF-8 text: {exc.reason}")
    print(tally.summary())
    return 0 if tally.failed == 0 and tally.differ == 0 else 1


# --------------------------------------------------------------------------- parser


class _VersionAction(argparse.Action):
    """``--version``: the package version and which codec backend is active (c or python)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        import kraft_jbod

        print(f"kraft-jbod {kraft_jbod.__version__} (codec: {kraft_jbod.codec_backend()})")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kraft-jbod", description="Kafka KRaft + KIP-858 (JBOD) toolkit.")
    ap.add_argument("--version", action=_VersionAction, help="print the version and the active codec, then exit")
    sub = ap.add_subparsers(dest="command", required=True)

    codec_p = sub.add_parser("codec", help="decode and round-trip raw Kafka bytes")
    codec_sub = codec_p.add_subparsers(dest="codec_command", required=True)
    d = codec_sub.add_parser(
        "decode",
        help="decode a hex frame or body",
        description="Without --kind, HEX is a request frame (size prefix optional). "
        "With --kind and --version, HEX is a bare body; add --framed for a response frame.",
    )
    d.add_argument("hex", help="hex bytes, or - to read them from stdin")
    d.add_argument(
        "--kind",
        choices=["request", "response", "header", "request_header", "response_header"],
        help="what a bare HEX is; `header` is a request header (--version is the header version)",
    )
    d.add_argument("--api-key", type=int)
    d.add_argument("--version", type=int)
    d.add_argument("--framed", action="store_true", help="HEX is a response header + body (size optional)")
    d.add_argument("--compact", action="store_true", help="one-line JSON")
    d.set_defaults(func=cmd_codec_decode)
    r = codec_sub.add_parser(
        "roundtrip",
        help="decode and re-encode JSON lines of {api_key, kind, version, hex}",
    )
    r.add_argument("file", help="JSON lines file, or - for stdin")
    r.set_defaults(func=cmd_codec_roundtrip)

    for register in _EXTRA_COMMANDS:
        register(sub)
    return ap


_EXTRA_COMMANDS: list[Callable[[Any], None]] = []


def _register_area_commands() -> None:
    """Each area registers its own subcommands; their heavy imports happen inside handlers."""
    from kraft_jbod.analytics import commands as analytics_commands
    from kraft_jbod.broker import commands as broker_commands
    from kraft_jbod.capture import commands as capture_commands
    from kraft_jbod.controller import commands as controller_commands
    from kraft_jbod.fuzz import commands as fuzz_commands
    from kraft_jbod.metrics import commands as metrics_commands

    for module in (
        capture_commands,
        controller_commands,
        broker_commands,
        fuzz_commands,
        analytics_commands,
        metrics_commands,
    ):
        _EXTRA_COMMANDS.append(module.register)


_register_area_commands()


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
        return _fail(str(exc))


def _path(text: str) -> Path:
    return Path(text)


if __name__ == "__main__":
    sys.exit(main())
