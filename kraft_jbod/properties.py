"""Kafka's properties files and listener lists, as every node type reads them.

:func:`parse_properties` reads text the way ``java.util.Properties.load`` does: natural
lines end at ``\\n``, ``\\r`` or ``\\r\\n``; leading blanks (space, tab, form feed) are
skipped; a line whose first non-blank is ``#`` or ``!`` is a comment; a line ending in an
odd number of backslashes continues on the next one (leading blanks of that one
dropped); the key ends at the first unescaped ``=``, ``:`` or blank, then blanks, one
optional ``=``/``:`` and blanks are skipped; ``\\t \\n \\r \\f \\uXXXX`` are escapes and
any other escaped character stands for itself. The last value of a repeated key wins.

:func:`parse_listeners` reads ``NAME://host:port`` lists (``listeners``,
``advertised.listeners``). The controller, the fake broker and ``meta.properties`` all
use these; typed settings stay with each node type (``controller/config.py``,
``broker/config.py``).

Invariant: pure, except :func:`load_properties`, which reads one file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kraft_jbod.errors import ConfigError

__all__ = ["Listener", "load_properties", "parse_listeners", "parse_override", "parse_properties"]


# --------------------------------------------------------------------------- properties


_BLANKS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, logical line) with continuations joined and comments dropped."""
    natural = re.split(r"\r\n|\r|\n", text)
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(natural):
        lineno = i + 1
        line = natural[i].lstrip(_BLANKS)
        i += 1
        if not line or line[0] in "#!":
            continue
        parts = []
        while True:
            trailing = len(line) - len(line.rstrip("\\"))
            if trailing % 2 == 1:
                parts.append(line[:-1])
                if i >= len(natural):
                    break  # a continuation at end of input just ends the line
                line = natural[i].lstrip(_BLANKS)
                i += 1
            else:
                parts.append(line)
                break
        out.append((lineno, "".join(parts)))
    return out


def _unescape(text: str, lineno: int) -> str:
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= len(text):
            i += 1  # a lone trailing backslash (only after an even-count continuation check)
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigError(f"line {lineno}: malformed \\uxxxx escape {text[i : i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


def _split_key_value(line: str) -> tuple[str, str]:
    i = 0
    n = len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _BLANKS:
            break
        i += 1
    key = line[:i]
    j = i
    while j < n and line[j] in _BLANKS:
        j += 1
    if j < n and line[j] in "=:":
        j += 1
    while j < n and line[j] in _BLANKS:
        j += 1
    return key, line[j:]


def parse_properties(text: str) -> dict[str, str]:
    """Parse properties text as ``java.util.Properties.load`` does.

    Raises:
        ConfigError: a malformed ``\\uxxxx`` escape (the message names the line).
    """
    props: dict[str, str] = {}
    for lineno, line in _logical_lines(text):
        raw_key, raw_value = _split_key_value(line)
        props[_unescape(raw_key, lineno)] = _unescape(raw_value, lineno)
    return props


def load_properties(path: Path) -> dict[str, str]:
    """Read and parse a properties file (UTF-8, as Kafka's scripts read it).

    Raises:
        ConfigError: the file cannot be read or parsed.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8: {exc.reason}") from None
    return parse_properties(text)


def parse_override(text: str) -> tuple[str, str]:
    """``key=value`` from ``--override``; the value may itself contain ``=``.

    Raises:
        ConfigError: no ``=`` or an empty key.
    """
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override {text!r} is not key=value")
    return key.strip(), value


# --------------------------------------------------------------------------- listeners


@dataclass(slots=True, frozen=True)
class Listener:
    """One ``NAME://host:port`` entry; host ``""`` means every interface, port 0 any free port."""

    name: str
    host: str
    port: int

    @property
    def bind_host(self) -> str | None:
        return self.host or None


# Kafka's shape: a name, ://, a host (bracketed for IPv6) and a port.
_LISTENER = re.compile(r"^([A-Za-z0-9_\-.]+)://(\[[0-9A-Fa-f:.%a-zA-Z]*\]|[0-9A-Za-z\-%._]*):(-?[0-9]+)$")


def parse_listeners(value: str, key: str = "listeners") -> list[Listener]:
    """Parse a comma-separated listeners value.

    Raises:
        ConfigError: an entry that is not ``NAME://host:port``, a port outside 0-65535, or a
            listener name used twice.
    """
    result: list[Listener] = []
    for entry in (e.strip() for e in value.split(",")):
        if not entry:
            continue
        m = _LISTENER.match(entry)
        if m is None:
            raise ConfigError(f"{key}: {entry!r} is not NAME://host:port")
        name, host, port_text = m.groups()
        port = int(port_text)
        if not 0 <= port <= 65535:
            raise ConfigError(f"{key}: port {port} in {entry!r} is outside 0-65535")
        if host.startswith("["):
            host = host[1:-1]
        name = name.upper()
        if any(li.name == name for li in result):
            raise ConfigError(f"{key}: listener name {name} appears more than once in {value!r}")
        result.append(Listener(name, host, port))
    return result
