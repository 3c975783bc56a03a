"""CRC-32C (Castagnoli) of record batches: the ``crc32c`` library when installed, else
pure Python.

Why a fallback: a stock Spark cluster's workers have pyspark, pyarrow and pandas but
nothing of ours; ``kraft-jbod stats`` ships its own pure-Python code to them, and a
compiled library cannot travel that way. The fallback gives the same values (a
byte-at-a-time table loop, 1-7 MB/s on this loaded machine against the library's GB/s;
slice-by-8 in Python measured no faster), so a worker without the library still decodes
and checks every batch, only slower. :data:`NATIVE` says whether the library is there.

Invariant: :func:`crc32c` of the same bytes is the same whichever implementation runs.

Why the library is imported late: its package ``__init__`` asks ``importlib.metadata``
for its own version, which imports the email parser and costs a cold start 35-50 ms of
CPU here, as much as the pure-Python loop spends on 250-400 KiB. So the first
:data:`PYTHON_BUDGET` bytes a process checksums go through the loop (at most ~10 ms), and
the library is imported only when a process checksums more than that: ``kraft-jbod
decode`` of a small capture, which is most of them, never pays for the import, and a large
one pays it once. ``NATIVE`` imports it on first access.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    NATIVE: bool  # resolved by __getattr__ below

__all__ = ["NATIVE", "crc32c", "crc32c_python"]

_UNRESOLVED: Final[Any] = object()
_native_crc32c: Any = _UNRESOLVED  # the library's function, None without it, or unresolved

#: Bytes checksummed in pure Python before the library is imported (see above).
PYTHON_BUDGET: Final = 64 << 10
_python_left = PYTHON_BUDGET


def _resolve() -> Callable[..., Any] | None:
    global _native_crc32c
    native: Callable[..., Any] | None
    try:
        from crc32c import crc32c as native
    except ImportError:  # a worker without the compiled library (see the module docstring)
        native = None
    _native_crc32c = native
    return native


def __getattr__(name: str) -> Any:
    if name == "NATIVE":  # True when the library computes the checksums
        native = _resolve() if _native_crc32c is _UNRESOLVED else _native_crc32c
        return native is not None
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_POLY: Final = 0x82F63B78  # Castagnoli, reflected


def _table() -> tuple[int, ...]:
    out = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        out.append(c)
    return tuple(out)


_TABLE: Final = _table()


def crc32c_python(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC-32C of ``data`` continuing from ``value``, in pure Python."""
    table = _TABLE
    crc = value ^ 0xFFFFFFFF
    for b in bytes(data):
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC-32C of ``data`` continuing from ``value`` (the library's, when installed and
    once the process has checksummed more than :data:`PYTHON_BUDGET` bytes)."""
    global _python_left
    native = _native_crc32c
    if native is _UNRESOLVED:
        if len(data) <= _python_left:
            _python_left -= len(data)
            return crc32c_python(data, value)
        native = _resolve()
    if native is not None:
        return int(native(data, value))
    return crc32c_python(data, value)
