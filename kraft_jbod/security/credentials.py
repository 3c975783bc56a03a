"""User credentials for SASL: a JSON file of users, passwords and SCRAM keys.

File format::

    {"users": {
        "admin":  {"password": "admin-secret"},
        "broker": {"password": "broker-secret", "mechanisms": ["SCRAM-SHA-512"]},
        "alice":  {"scram": {"SCRAM-SHA-256": {"salt": "<base64>", "iterations": 4096,
                                               "stored_key": "<base64>", "server_key": "<base64>"}}}
    }}

A user with a ``password`` may log in with PLAIN and with every SCRAM mechanism (or only
those listed in ``mechanisms``); SCRAM keys for such users are derived once at load time
(RFC 5802: SaltedPassword = Hi(password, salt, i), ClientKey = HMAC(SaltedPassword,
"Client Key"), StoredKey = H(ClientKey), ServerKey = HMAC(SaltedPassword, "Server Key")).
A user given only SCRAM keys cannot use PLAIN: the password is not known.

Invariants: the store never holds a SCRAM credential with fewer than 4096 iterations
(Kafka's minimum) unless built explicitly in code; password comparison is constant-time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kraft_jbod.errors import ConfigError

PLAIN: Final = "PLAIN"
SCRAM_SHA_256: Final = "SCRAM-SHA-256"
SCRAM_SHA_512: Final = "SCRAM-SHA-512"
SCRAM_HASHES: Final[dict[str, str]] = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
MECHANISMS: Final[tuple[str, ...]] = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)
MIN_ITERATIONS: Final = 4096
DEFAULT_ITERATIONS: Final = 4096
_MAX_ITERATIONS: Final = 1_000_000


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What a SCRAM server stores for one user and mechanism (never the password)."""

    mechanism: str
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @classmethod
    def derive(
        cls, mechanism: str, password: str, *, salt: bytes | None = None, iterations: int = DEFAULT_ITERATIONS
    ) -> ScramCredential:
        """Raises: ConfigError: not a SCRAM mechanism."""
        algo = SCRAM_HASHES.get(mechanism)
        if algo is None:
            raise ConfigError(f"{mechanism} is not a SCRAM mechanism")
        salt = os.urandom(16) if salt is None else salt
        salted = hashlib.pbkdf2_hmac(algo, password.encode("utf-8"), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", algo).digest()
        return cls(
            mechanism=mechanism,
            salt=salt,
            iterations=iterations,
            stored_key=hashlib.new(algo, client_key).digest(),
            server_key=hmac.new(salted, b"Server Key", algo).digest(),
        )

    def to_json(self) -> dict[str, Any]:
        b64 = base64.b64encode
        return {
            "salt": b64(self.salt).decode(),
            "iterations": self.iterations,
            "stored_key": b64(self.stored_key).decode(),
            "server_key": b64(self.server_key).decode(),
        }


@dataclass(slots=True)
class User:
    name: str
    password: str | None = None
    scram: dict[str, ScramCredential] = field(default_factory=dict)
    mechanisms: frozenset[str] = frozenset(MECHANISMS)


class CredentialStore:
    """Users by name. ``check_plain`` and ``scram`` are what the SASL servers ask."""

    def __init__(self, users: Mapping[str, User] | None = None) -> None:
        self._users: dict[str, User] = dict(users or {})

    def add_user(
        self,
        name: str,
        password: str,
        *,
        mechanisms: tuple[str, ...] = MECHANISMS,
        iterations: int = DEFAULT_ITERATIONS,
    ) -> User:
        """Add (or replace) a user with a password; SCRAM keys are derived now.

        Raises:
            ConfigError: an unknown mechanism or an empty name.
        """
        if not name:
            raise ConfigError("a user name must not be empty")
        for m in mechanisms:
            if m not in MECHANISMS:
                raise ConfigError(f"user {name}: unknown mechanism {m!r} (known: {', '.join(MECHANISMS)})")
        scram = {m: ScramCredential.derive(m, password, iterations=iterations) for m in mechanisms if m in SCRAM_HASHES}
        user = User(name, password, scram, frozenset(mechanisms))
        self._users[name] = user
        return user

    def __contains__(self, name: object) -> bool:
        return name in self._users

    def __len__(self) -> int:
        return len(self._users)

    def users(self) -> list[str]:
        return sorted(self._users)

    def check_plain(self, name: str, password: str) -> bool:
        """Whether ``password`` is ``name``'s and the user may use PLAIN (constant-time compare)."""
        user = self._users.get(name)
        if user is None or user.password is None or PLAIN not in user.mechanisms:
            # Still compare, so an unknown user costs the same as a wrong password.
            hmac.compare_digest(password.encode("utf-8"), b"\x00" * max(1, len(password)))
            return False
        return hmac.compare_digest(password.encode("utf-8"), user.password.encode("utf-8"))

    def scram(self, name: str, mechanism: str) -> ScramCredential | None:
        user = self._users.get(name)
        if user is None or mechanism not in user.mechanisms:
            return None
        return user.scram.get(mechanism)

    # -- files

    @classmethod
    def from_json(cls, doc: object, source: str = "credentials") -> CredentialStore:
        """Raises: ConfigError: the document does not follow the format of the module docstring."""
        if not isinstance(doc, dict) or not isinstance(doc.get("users"), dict):
            raise ConfigError(f'{source}: expected an object with a "users" object')
        store = cls()
        for name, entry in doc["users"].items():
            where = f"{source}: user {name!r}"
            if not isinstance(entry, dict):
                raise ConfigError(f"{where}: must be an object")
            extra = set(entry) - {"password", "mechanisms", "scram", "iterations"}
            if extra:
                raise ConfigError(f"{where}: unknown field(s) {', '.join(sorted(extra))}")
            mechs_raw = entry.get("mechanisms", list(MECHANISMS))
            if not isinstance(mechs_raw, list) or not all(isinstance(m, str) for m in mechs_raw):
                raise ConfigError(f"{where}: mechanisms must be a list of names")
            mechs = tuple(m.upper() for m in mechs_raw)
            iterations = entry.get("iterations", DEFAULT_ITERATIONS)
            if (
                isinstance(iterations, bool)
                or not isinstance(iterations, int)
                or not (MIN_ITERATIONS <= iterations <= _MAX_ITERATIONS)
            ):
                raise ConfigError(f"{where}: iterations must be an integer in {MIN_ITERATIONS}..{_MAX_ITERATIONS}")
            password = entry.get("password")
            if password is not None:
                if not isinstance(password, str):
                    raise ConfigError(f"{where}: password must be a string")
                user = store.add_user(name, password, mechanisms=mechs, iterations=iterations)
            else:
                user = User(name, None, {}, frozenset(mechs))
                store._users[name] = user
            for mech, cred in (entry.get("scram") or {}).items():
                user.scram[mech.upper()] = _scram_from_json(mech.upper(), cred, f"{where}.scram.{mech}")
                user.mechanisms = user.mechanisms | {mech.upper()}
            if password is None and not user.scram:
                raise ConfigError(f"{where}: needs a password or scram keys")
        return store

    @classmethod
    def load(cls, path: Path) -> CredentialStore:
        """Raises: ConfigError: unreadable, not JSON, or not the format."""
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read credentials file {path}: {exc.strerror}") from None
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise ConfigError(f"credentials file {path} is not JSON: {exc}") from None
        return cls.from_json(doc, str(path))


def _scram_from_json(mech: str, cred: object, where: str) -> ScramCredential:
    if mech not in SCRAM_HASHES:
        raise ConfigError(f"{where}: {mech} is not a SCRAM mechanism")
    if not isinstance(cred, dict):
        raise ConfigError(f"{where}: must be an object")
    try:
        salt = base64.b64decode(cred["salt"], validate=True)
        stored = base64.b64decode(cred["stored_key"], validate=True)
        server = base64.b64decode(cred["server_key"], validate=True)
        iterations = cred["iterations"]
    except (KeyError, TypeError, binascii.Error) as exc:
        raise ConfigError(f"{where}: needs base64 salt, stored_key, server_key and iterations ({exc})") from None
    if (
        isinstance(iterations, bool)
        or not isinstance(iterations, int)
        or not (MIN_ITERATIONS <= iterations <= _MAX_ITERATIONS)
    ):
        raise ConfigError(f"{where}: iterations must be an integer in {MIN_ITERATIONS}..{_MAX_ITERATIONS}")
    size = hashlib.new(SCRAM_HASHES[mech]).digest_size
    if len(stored) != size or len(server) != size:
        raise ConfigError(f"{where}: keys must be {size} bytes for {mech}")
    return ScramCredential(mech, salt, iterations, stored, server)
