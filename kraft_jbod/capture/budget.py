"""The decode budget: how much of a capture's ``records`` fields may become records.

A record batch's header declares its records count and its payload may be compressed a
millionfold (a 1 KiB zstd batch can hold millions of empty records), so a decoder that
expands every batch can be made to hold gigabytes by a capture of a few kilobytes.
:class:`DecodeLimits` bounds that per frame and per file; the decoder
(:mod:`.kafka`, rule 6) keeps what goes past it undecoded and says so in an anomaly.

This module stays import-light (argparse and typing only): every ``kraft-jbod`` run
imports it to build the ``decode`` and ``stats`` options, before knowing whether anything
will be decoded. That is why :class:`DecodeLimits` is a named tuple and not a dataclass:
``dataclasses`` imports ``inspect`` and costs a cold start about 30 ms of CPU here.
"""

from __future__ import annotations

import argparse
from typing import Final, NamedTuple

__all__ = ["DEFAULT_LIMITS", "DecodeLimits", "add_options", "limits_from_args"]


class _Limits(NamedTuple):
    frame_records: int
    frame_bytes: int
    file_records: int
    file_bytes: int


class DecodeLimits(_Limits):
    """How much of ``records`` fields a decoder may turn into records (rule 6).

    ``frame_records`` / ``frame_bytes``: records and decompressed bytes per frame;
    ``file_records`` / ``file_bytes``: the same over a decoder's whole life (one file for
    ``kraft-jbod decode``, one task's file for ``stats``, one run of ``capture listen``).
    A decoded record costs a few hundred bytes of Python objects and JSON, so the frame
    defaults keep one frame under about 100 MB whatever its compression ratio.

    Immutable, compared and hashed by value. Raises ValueError for a negative limit.
    """

    __slots__ = ()

    def __new__(
        cls,
        frame_records: int = 100_000,
        frame_bytes: int = 32 << 20,
        file_records: int = 20_000_000,
        file_bytes: int = 4 << 30,
    ) -> DecodeLimits:
        self = super().__new__(cls, frame_records, frame_bytes, file_records, file_bytes)
        for name, value in zip(self._fields, self, strict=True):
            if value < 0:
                raise ValueError(f"{name} must be >= 0")
        return self


DEFAULT_LIMITS: Final = DecodeLimits()


def limits_from_args(args: argparse.Namespace) -> DecodeLimits:
    """The limits named by :func:`add_options`' options, defaults for those not given."""
    d = DEFAULT_LIMITS
    return DecodeLimits(
        frame_records=d.frame_records if args.max_frame_records is None else args.max_frame_records,
        frame_bytes=d.frame_bytes if args.max_frame_bytes is None else args.max_frame_bytes,
        file_records=d.file_records if args.max_file_records is None else args.max_file_records,
        file_bytes=d.file_bytes if args.max_file_bytes is None else args.max_file_bytes,
    )


def _count(text: str) -> int:
    """A non-negative count or size for the budget options (``1_000_000`` and ``1e6`` too)."""
    try:
        value = int(float(text)) if any(c in text for c in ".eE") else int(text)
    except (ValueError, OverflowError):  # OverflowError: 1e400 and inf are floats, not counts
        raise argparse.ArgumentTypeError(f"not a count: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more: {text!r}")
    return value


def add_options(p: argparse.ArgumentParser, file_word: str) -> None:
    """The four ``--max-*`` options of a command that decodes captures."""
    d = DEFAULT_LIMITS
    g = p.add_argument_group(
        "decode budget",
        "records fields past these limits are kept undecoded with a 'decode budget' anomaly "
        "(their bytes stay in the frame's body)",
    )
    g.add_argument(
        "--max-frame-records", type=_count, metavar="N", help=f"records per frame (default {d.frame_records})"
    )
    g.add_argument(
        "--max-frame-bytes", type=_count, metavar="N", help=f"decompressed bytes per frame (default {d.frame_bytes})"
    )
    g.add_argument(
        "--max-file-records", type=_count, metavar="N", help=f"records per {file_word} (default {d.file_records})"
    )
    g.add_argument(
        "--max-file-bytes",
        type=_count,
        metavar="N",
        help=f"decompressed bytes per {file_word} (default {d.file_bytes})",
    )
