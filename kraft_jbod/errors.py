"""The one exception tree of kraft-jbod.

Every error the package raises on purpose derives from :class:`KraftJbodError`.
The contract, enforced by property tests and the fuzzer:

* decoders raise only :class:`DecodeError` (whatever bytes they are fed);
* encoders raise only :class:`EncodeError` for values the wire cannot carry;
* sans-I/O connections raise only :class:`ProtocolError` for a peer's misbehaviour,
  carrying the Kafka error code the server should answer with (or ``None`` when the
  only sane answer is closing the connection).

Anything else escaping is a bug in kraft-jbod, not in the peer.
"""

from __future__ import annotations


class KraftJbodError(Exception):
    """Root of every deliberate kraft-jbod error."""


class DecodeError(KraftJbodError):
    """Bytes that do not decode as the message they claim to be.

    Carries where it happened so a user holding the bytes can find the culprit:
    ``api_key`` / ``version`` of the message (``None`` when unknown), the byte
    ``offset`` into the buffer being decoded and the dotted ``field_path``.
    """

    def __init__(
        self,
        reason: str,
        *,
        offset: int | None = None,
        field_path: str = "",
        api_key: int | None = None,
        version: int | None = None,
        message: str | None = None,
    ) -> None:
        self.reason = reason
        self.offset = offset
        self.field_path = field_path
        self.api_key = api_key
        self.version = version
        self.message = message
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.message is not None:
            where.append(self.message)
        if self.api_key is not None:
            where.append(f"api_key={self.api_key}")
        if self.version is not None:
            where.append(f"v{self.version}")
        if self.field_path:
            where.append(f"field {self.field_path}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"{self.reason} ({', '.join(where)})" if where else self.reason

    def refine(
        self,
        *,
        field: str | None = None,
        api_key: int | None = None,
        version: int | None = None,
        message: str | None = None,
    ) -> DecodeError:
        """Add context on the way out of nested readers; returns self for ``raise``."""
        if field:
            self.field_path = f"{field}.{self.field_path}" if self.field_path else field
        if api_key is not None and self.api_key is None:
            self.api_key = api_key
        if version is not None and self.version is None:
            self.version = version
        if message is not None and self.message is None:
            self.message = message
        self.args = (self._render(),)
        return self


class BudgetExceeded(DecodeError):
    """Bytes that would decode, but past the caller's budget (records or decompressed bytes).

    Not damage: the same bytes decode with a larger budget. Callers that bound work per
    frame or per file (the capture decoder, ``kraft-jbod stats``) catch it to keep the
    bytes undecoded with an anomaly instead of holding millions of records in memory.
    """


class EncodeError(KraftJbodError):
    """A value that cannot be written at the requested version."""

    def __init__(self, reason: str, *, field_path: str = "") -> None:
        self.reason = reason
        self.field_path = field_path
        super().__init__(f"{reason} (field {field_path})" if field_path else reason)


class ProtocolError(KraftJbodError):
    """The peer broke the protocol.

    ``error_code`` is the Kafka error code to answer with, or ``None`` when Kafka's
    own answer is to close the connection without a response.
    """

    def __init__(self, reason: str, *, error_code: int | None = None) -> None:
        self.reason = reason
        self.error_code = error_code
        super().__init__(reason)


class UnknownKeyError(KraftJbodError, LookupError):
    """A lookup by a protocol number (api key, error code) that no schema defines."""


class ConfigError(KraftJbodError):
    """A configuration file, property or command-line value that cannot be used."""


class StorageError(KraftJbodError):
    """On-disk state (meta.properties, the metadata log) that is missing or inconsistent."""
