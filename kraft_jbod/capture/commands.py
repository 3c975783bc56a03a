"""CLI commands of the capture area: ``kraft-jbod decode`` and ``kraft-jbod capture listen``.

``register(sub)`` adds the subparsers to the main parser (see :mod:`kraft_jbod.cli`); each
handler returns an exit code: 0 success, 1 some frame did not decode (truncated frames,
which the capture cut, do not count), 2 unreadable input or bad usage.

The progress bar (tqdm, on stderr) follows the bytes read from each file: one bar per
input, named after the file, with percentage and ETA, cleared when the file is done so
no stray line stays behind. It appears only when stderr is a terminal and the file takes
more than a moment; ``--no-progress`` turns it off. Output goes through
:mod:`kraft_jbod.console` only.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO

from kraft_jbod import console
from kraft_jbod.capture import budget
from kraft_jbod.errors import DecodeError

if TYPE_CHECKING:
    import asyncio

    from kraft_jbod.capture.budget import DecodeLimits
    from kraft_jbod.capture.kafka import DecodedFrame
    from kraft_jbod.capture.output import Summary

# The decoder and output modules are imported inside the handlers: every `kraft-jbod`
# invocation registers these commands, and most never decode anything.

__all__ = ["cmd_decode", "cmd_listen", "listen", "register"]

_BAR_DELAY_S = 0.5  # a file decoded faster than this never shows a bar


def _fail(msg: str) -> int:
    return console.fail(msg)


def _frames(
    fh: BinaryIO,
    ports: list[int] | None,
    summary: Summary,
    check_canonical: bool,
    name: str = "",
    bar: Any = None,
    limits: DecodeLimits | None = None,
) -> Iterator[DecodedFrame]:
    from kraft_jbod.capture.kafka import DEFAULT_LIMITS, KafkaDecoder, decode_capture

    dec = KafkaDecoder(check_canonical=check_canonical, limits=limits or DEFAULT_LIMITS)

    def cut_short(offset: int) -> None:
        summary.files_cut_short.append((name, offset))
        text = (
            f"{name}: the capture file ends inside a record at byte {offset} "
            "(cut short); everything before it was decoded"
        )
        if bar is not None:
            bar.write(f"kraft-jbod: {text}", file=console.stderr())  # above the bar, not through it
        else:
            console.error(text)

    for f in decode_capture(fh, ports=ports, decoder=dec, on_truncated=cut_short):
        summary.add(f)
        yield f
    for end in dec.flows:
        summary.add_flow(end)


def cmd_decode(args: argparse.Namespace) -> int:
    from kraft_jbod.capture.output import Summary, frame_to_line

    sources = _decode_sources(args)
    problem = _decode_input_problem(sources, args.output)
    if problem is not None:
        return _fail(problem)
    ports = args.port or None
    summary = Summary()
    show_progress = not args.no_progress and sys.stderr.isatty()
    tmp_out = None if not args.output else Path(args.output).with_name(Path(args.output).name + ".partial")
    with ExitStack() as stack:
        try:
            out = _decode_output(stack, tmp_out, args.summary)
        except OSError as exc:
            return _fail(f"cannot write {args.output}: {exc.strerror}")
        for name, path in sources:
            try:
                fh, size = _open_source(stack, path)
            except OSError as exc:
                return _fail(f"cannot read {name}: {exc.strerror}")
            reader, bar = _with_progress_bar(stack, fh, name, size) if show_progress and size else (fh, None)
            try:
                for f in _frames(
                    reader, ports, summary, not args.no_canonical, name, bar, budget.limits_from_args(args)
                ):
                    if out is not None:
                        out.write(frame_to_line(f))
                        out.write("\n")
            except DecodeError as exc:
                return _fail(f"{name}: not a readable capture: {exc}")
        if tmp_out is not None and out is not None:
            out.close()
            os.replace(tmp_out, args.output)
    if args.summary:
        console.line(summary.render())
    return 1 if summary.undecoded else 0


def _decode_sources(args: argparse.Namespace) -> list[tuple[str, Path | None]]:
    """The inputs of ``decode`` by name: the built-in sample (path None), then the files."""
    sources: list[tuple[str, Path | None]] = []
    if args.sample:
        # Only with --sample: building the demo capture encodes a dozen message types.
        from kraft_jbod.capture.sample import SAMPLE_NAME

        sources.append((SAMPLE_NAME, None))
    sources.extend((f, Path(f)) for f in args.files)
    return sources


def _decode_input_problem(sources: list[tuple[str, Path | None]], output: str | None) -> str | None:
    """Why ``decode`` cannot start; every input is checked before --output is touched, so
    a typo does not empty it."""
    if not sources:
        return "decode: give capture FILE(s) or --sample"
    for name, path in sources:
        if path is not None and not path.is_file():
            return f"cannot read {name}: {'is a directory' if path.is_dir() else 'no such file'}"
    if output and Path(output).is_dir():
        return f"cannot write {output}: is a directory (--output takes a file)"
    return None


def _decode_output(stack: ExitStack, tmp_out: Path | None, summary_only: bool) -> TextIO | None:
    """Where decoded lines go: the temporary twin of --output (removed unless the run
    completes and replaces --output with it), stdout, or nowhere with --summary.

    Raises:
        OSError: the temporary file cannot be created.
    """
    if tmp_out is None:
        return None if summary_only else console.stdout()
    out = stack.enter_context(open(tmp_out, "w", encoding="utf-8"))
    stack.callback(lambda: tmp_out.unlink(missing_ok=True))
    return out


def _open_source(stack: ExitStack, path: Path | None) -> tuple[BinaryIO, int | None]:
    """An input opened for reading, with its size (None for the in-memory sample).

    Raises:
        OSError: the file cannot be opened.
    """
    if path is None:
        from kraft_jbod.capture.sample import build_sample

        return io.BytesIO(build_sample()), None
    fh = stack.enter_context(path.open("rb"))
    return fh, path.stat().st_size


def _with_progress_bar(stack: ExitStack, fh: BinaryIO, name: str, size: int) -> tuple[Any, Any]:
    """``fh`` wrapped to feed a progress bar on stderr, and the bar."""
    from tqdm import tqdm
    from tqdm.utils import CallbackIOWrapper

    # One bar per file; CallbackIOWrapper feeds it without opening a second,
    # bare bar as tqdm.wrapattr does; leave=False clears it when done.
    bar = stack.enter_context(
        tqdm(
            total=size,
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            desc=Path(name).name,
            file=console.stderr(),
            delay=_BAR_DELAY_S,
            leave=False,
            dynamic_ncols=True,
        )
    )
    return CallbackIOWrapper(bar.update, fh, "read"), bar


async def listen(
    host: str,
    port: int,
    out: TextIO,
    *,
    count: int | None = None,
    timeout: float | None = None,
    ready: asyncio.Event | None = None,
    bound: list[tuple[str, int]] | None = None,
    announce: Any = None,
    limits: DecodeLimits | None = None,
) -> int:
    """Receive tap datagrams on ``host:port`` and write one JSON line per decoded frame.

    Stops after ``count`` frames or ``timeout`` seconds without a datagram (when given).
    ``ready`` is set once bound; the bound address is appended to ``bound`` (port 0
    picks one). ``limits`` bound records decoding (the file limits span the whole run).
    Returns the number of frames written. Raises OSError if it cannot bind.
    """
    import asyncio

    import asyncio_dgram  # the `net` extra; cmd_listen checks for it first

    from kraft_jbod.capture.kafka import DEFAULT_LIMITS, KafkaDecoder
    from kraft_jbod.capture.output import frame_to_line
    from kraft_jbod.capture.tap import TapListener

    stream = await asyncio_dgram.bind((host, port))
    if bound is not None:
        bound.append(stream.sockname[:2])
    if announce is not None:
        announce(str(stream.sockname[0]), int(stream.sockname[1]))
    if ready is not None:
        ready.set()
    listener = TapListener(KafkaDecoder(limits=limits or DEFAULT_LIMITS))
    written = 0
    try:
        while count is None or written < count:
            try:
                if timeout is None:
                    raw, addr = await stream.recv()
                else:
                    raw, addr = await asyncio.wait_for(stream.recv(), timeout)
            except TimeoutError:
                break
            for f in listener.feed(raw, addr):
                out.write(frame_to_line(f) + "\n")
                written += 1
            out.flush()
        if count is None or written < count:
            for f in listener.finish():
                out.write(frame_to_line(f) + "\n")
                written += 1
            out.flush()
    finally:
        stream.close()
    return written


def cmd_listen(args: argparse.Namespace) -> int:
    import asyncio

    host, _, port_text = args.address.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port_text)
    except ValueError:
        return _fail(f"listen: expected HOST:PORT, got {args.address!r}")
    console.require("capture listen", "asyncio_dgram")
    try:
        # stdout carries the frames, so the bound address goes to stderr, in the usual shape.
        asyncio.run(
            listen(
                host,
                port,
                console.stdout(),
                count=args.count,
                timeout=args.timeout,
                announce=lambda h, p: console.note(f"listening on TAP {console.host_port(h, p)}"),
                limits=budget.limits_from_args(args),
            )
        )
    except OSError as exc:
        return _fail(f"listen: cannot bind {args.address}: {exc.strerror or exc}")
    return 0


def register(sub: Any) -> None:
    """Add ``decode`` and ``capture listen`` to the main parser's subcommands."""
    d = sub.add_parser(
        "decode",
        help="decode Kafka traffic in pcap/pcapng files to JSON lines",
        description="Reassembles TCP, splits Kafka frames, pairs responses with requests "
        "and decodes both; one JSON line per frame. Ports are found automatically; "
        "--port names server ports (needed when a capture starts mid-connection).",
    )
    d.add_argument("files", nargs="*", metavar="FILE", help="pcap or pcapng file")
    d.add_argument("--port", type=int, action="append", metavar="N", help="a Kafka server port (repeatable)")
    d.add_argument("--summary", action="store_true", help="print a summary table (JSON lines then go only to --output)")
    d.add_argument("--output", metavar="FILE", help="write the JSON lines to FILE")
    d.add_argument("--no-progress", action="store_true", help="no progress bar")
    d.add_argument("--no-canonical", action="store_true", help="skip the re-encoding check (faster)")
    d.add_argument("--sample", action="store_true", help="decode the built-in KIP-858 demo capture")
    budget.add_options(d, "file")
    d.set_defaults(func=cmd_decode)

    c = sub.add_parser("capture", help="live capture tools")
    csub = c.add_subparsers(dest="capture_command", required=True)
    li = csub.add_parser(
        "listen",
        help="decode frames mirrored by a server's UDP tap",
        description="Prints one JSON line per frame the tap mirrors.",
    )
    li.add_argument("address", metavar="HOST:PORT")
    li.add_argument("--count", type=int, help="stop after this many frames")
    li.add_argument("--timeout", type=float, help="stop after this many idle seconds")
    budget.add_options(li, "run")
    li.set_defaults(func=cmd_listen)
