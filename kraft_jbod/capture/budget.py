"""The decode budget: how much of a capture's ``records`` fields may become records.

A record batch's header declares its records count and its payload may be compressed a
millionfold (a 1 KiB zstd batch can hold millions of empty records), so a decoder that
expands every batch can be made to hold gigabytes by a capture of a few kilobytes.
:class:`DecodeLimits` bounds that per frame and per file; the decoder
(:mod:`.kafka`, rule 6) keeps what goes past it undecoded and says so in an anomaly.

This module stays import-light (stdlib only): the command line builds its options from
the defaults here without loading the decoder.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["DEFAULT_LIMITS", "DecodeLimits"]


@dataclass(frozen=True, slots=True)
class DecodeLimits:
    """How much of ``records`` fields a decoder may turn into records (rule 6).

    ``frame_records`` / ``frame_bytes``: records and decompressed bytes per frame;
    ``file_records`` / ``file_bytes``: the same over a decoder's whole life (one file for
    ``kraft-jbod decode``, one task's file for ``stats``, one run of ``capture listen``).
    A decoded record costs a few hundred bytes of Python objects and JSON, so the frame
    defaults keep one frame under about 100 MB whatever its compression ratio.
    """

    frame_records: int = 100_000
    frame_bytes: int = 32 << 20
    file_records: int = 20_000_000
    file_bytes: int = 4 << 30

    def __post_init__(self) -> None:
        for name in ("frame_records", "frame_bytes", "file_records", "file_bytes"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")


DEFAULT_LIMITS: Final = DecodeLimits()
