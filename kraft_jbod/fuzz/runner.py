"""The live fuzzer: generated and mutated requests over many connections, each outcome judged.

Strategy:

* Case ``i`` of a run is a pure function of ``(seed, i)`` and of what the target said
  it serves (its ApiVersions answer, fetched once at start): :class:`CaseFactory` draws it
  from ``random.Random(f"{seed}:{i}")``. So every finding is reproducible from its seed
  and index, and its bytes are saved too.
* ``connections`` workers each hold one connection and take the next case index from a
  shared counter. A connection the server closed is replaced. A case's bytes go out in
  one write; when they end in an incomplete or invalid frame the write side is shut
  (half-close), so a correct server sees EOF and must close rather than wait.
* Judging (:meth:`Runner.exchange`), per case:

  - every complete frame gets a response or the connection closes;
  - a response must carry the frame's correlation id and decode as that api key's
    response at that version (ApiVersions answering UNSUPPORTED_VERSION is read at v0,
    KIP-511); otherwise the outcome is ``bad_answer``;
  - nothing within ``timeout``: a probe (ApiVersions v0) goes out on the same
    connection. Answered: the server dropped the frame silently (``silent``). Not
    answered: a fresh connection checks the server: alive means ``timeout`` (a hang),
    dead means ``gone``;
  - a spawned target that exited is ``gone`` whatever the socket said.

* Outcome classes: ``answered``, ``error_code`` (top-level error code non-zero),
  ``closed``, ``timeout``, ``gone``, plus ``bad_answer`` and ``silent``. ``timeout``,
  ``gone``, ``bad_answer`` and ``silent`` are findings, and so is an RSS above the limit.
* Bounded: at most ``count`` cases and ``time_limit`` seconds; findings are capped per
  signature. Targets must be loopback addresses unless ``allow_remote`` is set.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import ipaddress
import itertools
import random
import re
import socket
import struct
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from kraft_jbod import codec, messages
from kraft_jbod.errors import ConfigError, DecodeError, EncodeError
from kraft_jbod.fuzz import mutators, strategies
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.api_versions_request import ApiVersionsRequest

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
PROBE_CORRELATION_ID = 0x7FFF_FFF0
DEFAULT_MAX_RESPONSE = 64 * 1024 * 1024


class Outcome(enum.StrEnum):
    ANSWERED = "answered"
    ERROR_CODE = "error_code"
    CLOSED = "closed"
    TIMEOUT = "timeout"
    GONE = "gone"
    BAD_ANSWER = "bad_answer"
    SILENT = "silent"
    SLOW = "slow"  # a long-polling api (Fetch, JoinGroup...) still waiting: not judged


# Requests a correct server may hold for seconds (max wait, rebalance delays).
LONG_POLL_KEYS = frozenset({1, 11, 14, 78})


FINDING_OUTCOMES = frozenset({Outcome.TIMEOUT, Outcome.GONE, Outcome.BAD_ANSWER, Outcome.SILENT})


@dataclass(slots=True)
class Case:
    """One unit of traffic: the bytes written on a connection, and how they were made."""

    seed: int
    index: int
    data: bytes
    ops: list[str]
    origin: str  # "generated", "valid", "corpus", "stateful"
    api_key: int | None = None
    api_version: int | None = None


@dataclass(slots=True)
class Result:
    outcome: Outcome
    detail: str = ""
    error_code: int | None = None
    responses: int = 0
    response_hex: list[str] = field(default_factory=list)
    payloads: list[bytes] = field(default_factory=list)  # every whole response, in order


# --------------------------------------------------------------------------- addresses


def parse_target(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``[V6]:PORT``.

    Raises:
        ConfigError: no port, or a port outside 1-65535.
    """
    host, sep, port_text = text.rpartition(":")
    if not sep or not host:
        raise ConfigError(f"target {text!r} is not HOST:PORT")
    host = host.strip("[]")
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigError(f"target {text!r}: port {port_text!r} is not a number") from None
    if not 0 < port < 65536:
        raise ConfigError(f"target {text!r}: port {port} is outside 1-65535")
    return host, port


def check_loopback(host: str, allow_remote: bool) -> None:
    """Refuse a target that is not a loopback address unless the user said otherwise.

    Raises:
        ConfigError: ``host`` resolves to an address outside loopback.
    """
    if allow_remote:
        return
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        raise ConfigError(f"cannot resolve target host {host!r}: {exc}") from None
    for info in infos:
        addr = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if not addr.is_loopback:
            raise ConfigError(
                f"target {host} resolves to {addr}, which is not loopback; pass --allow-remote to fuzz it"
            )


# --------------------------------------------------------------------------- one connection


class Conn:
    """An asyncio stream connection that reads size-prefixed responses with a deadline."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, max_response: int) -> None:
        self.reader = reader
        self.writer = writer
        self.max_response = max_response
        self.dead = False
        self.history: list[bytes] = []  # the last few cases written on this connection

    @classmethod
    async def open(cls, host: str, port: int, timeout: float, max_response: int = DEFAULT_MAX_RESPONSE) -> Conn:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        return cls(reader, writer, max_response)

    async def send(self, data: bytes, *, half_close: bool = False) -> None:
        self.history = [*self.history[-7:], data]
        self.writer.write(data)
        if half_close and self.writer.can_write_eof():
            self.writer.write_eof()
            self.dead = True  # nothing more may be written; the case decides what remains
        await self.writer.drain()

    async def read_frame(self, timeout: float) -> bytes | None:
        """The next response payload; ``None`` when the peer closed.

        Raises:
            TimeoutError: nothing complete within ``timeout``.
            DecodeError: a size prefix that is negative, tiny or above ``max_response``.
        """
        try:
            head = await asyncio.wait_for(self.reader.readexactly(4), timeout)
            (size,) = _I32.unpack(head)
            if size < 4 or size > self.max_response:
                raise DecodeError(f"response size prefix {size} is outside 4..{self.max_response}", offset=0)
            return await asyncio.wait_for(self.reader.readexactly(size), timeout)
        except (asyncio.IncompleteReadError, ConnectionError):
            self.dead = True
            return None

    async def wait_closed(self, timeout: float) -> bool:
        """True when the peer closes (EOF) within ``timeout``; bytes arriving first are dropped."""
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                chunk = await asyncio.wait_for(self.reader.read(65536), left)
                if not chunk:
                    return True
        except TimeoutError:
            return False
        except ConnectionError:
            return True

    def close(self) -> None:
        self.dead = True
        try:
            self.writer.close()
        except (OSError, RuntimeError):
            pass


def api_versions_frame(version: int, corr: int) -> bytes:
    body = ApiVersionsRequest()
    if version >= 3:
        body.client_software_name = "kraft-jbod-fuzz"
        body.client_software_version = "0.1"
    return codec.encode_request(body, version, corr, "kraft-jbod-fuzz")


async def fetch_api_versions(host: str, port: int, timeout: float) -> dict[int, tuple[int, int]]:
    """What the target says it serves: api key -> (min, max). Empty when it will not say.

    Tries v3 then v0, as clients do after a KIP-511 refusal.
    """
    for version in (3, 0):
        try:
            conn = await Conn.open(host, port, timeout)
        except (OSError, TimeoutError):
            return {}
        try:
            await conn.send(api_versions_frame(version, 1))
            payload = await conn.read_frame(timeout)
            if payload is None:
                continue
            read_at = codec.response_read_version(ApiKey.API_VERSIONS, version, payload)
            resp = codec.decode_response(payload, ApiKey.API_VERSIONS, read_at).body
            if resp.error_code == 0:
                return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys}
        except (DecodeError, TimeoutError, OSError):
            continue
        finally:
            conn.close()
    return {}


async def probe_server(host: str, port: int, timeout: float) -> str:
    """``"answering"`` (ApiVersions v0 answered), ``"hung"`` (accepts, never answers) or ``"refused"``."""
    try:
        conn = await Conn.open(host, port, timeout)
    except (OSError, TimeoutError):
        return "refused"
    try:
        await conn.send(api_versions_frame(0, PROBE_CORRELATION_ID))
        payload = await conn.read_frame(timeout)
    except TimeoutError:
        return "hung"
    except (DecodeError, OSError):
        return "answering"
    finally:
        conn.close()
    # A close is an answer of sorts: the server is alive and reading its sockets.
    del payload
    return "answering"


# --------------------------------------------------------------------------- judging answers


def expected_read_version(api_key: int, api_version: int, payload: bytes) -> int:
    """The version to read a response at: ApiVersions refusing the version is v0 (KIP-511)."""
    return codec.response_read_version(api_key, api_version, payload)


def top_error_code(body: Any) -> int | None:
    """The first non-zero error code in a response, top level first, then one level of arrays."""
    code = getattr(body, "error_code", None)
    if isinstance(code, int) and code != 0:
        return code
    for f in getattr(body, "_FIELDS", ()):
        if f.type.startswith("[]") and f.struct is not None:
            for item in getattr(body, f.attr, None) or ():
                sub = getattr(item, "error_code", None)
                if isinstance(sub, int) and sub != 0:
                    return sub
    return None


def judge_response(frame: bytes, payload: bytes) -> Result:
    """Check one response against the request frame it answers."""
    key, version, corr = codec.peek_request(frame)
    if len(payload) < 4:
        return Result(Outcome.BAD_ANSWER, f"response of {len(payload)} bytes has no correlation id")
    (got,) = _I32.unpack_from(payload, 0)
    if got != corr:
        return Result(Outcome.BAD_ANSWER, f"response correlation id {got}, request had {corr}")
    cls = messages.response_class(key)
    read_version = expected_read_version(key, version, payload)
    if cls is None or not cls.VALID_VERSIONS[0] <= read_version <= cls.VALID_VERSIONS[1]:
        # We cannot read it, so we cannot judge it. Kafka would have closed instead.
        return Result(Outcome.ANSWERED, f"answered {codec.api_name(key)} v{version}, which we cannot decode")
    try:
        decoded = codec.decode_response(payload, key, read_version)
    except DecodeError as exc:
        return Result(Outcome.BAD_ANSWER, f"{codec.api_name(key)} v{read_version} response does not decode: {exc}")
    code = top_error_code(decoded.body)
    if code is not None:
        return Result(Outcome.ERROR_CODE, f"{codec.api_name(key)} v{version} error {code}", error_code=code)
    return Result(Outcome.ANSWERED, f"{codec.api_name(key)} v{version}")


# --------------------------------------------------------------------------- generating cases


class CaseFactory:
    """Deterministic cases from ``(seed, index)`` given what the target serves."""

    def __init__(
        self,
        seed: int,
        served: dict[int, tuple[int, int]],
        corpus: list[bytes] | None = None,
        *,
        valid_ratio: float = 0.1,
    ) -> None:
        self.seed = seed
        known = {k: messages.request_class(k) for k in messages.REQUESTS}
        self._classes = {k: c for k, c in known.items() if c is not None}
        self.served = {
            k: (max(lo, self._classes[k].VALID_VERSIONS[0]), min(hi, self._classes[k].VALID_VERSIONS[1]))
            for k, (lo, hi) in served.items()
            if k in self._classes
        }
        self.served = {k: r for k, r in self.served.items() if r[0] <= r[1]}
        self.corpus = list(corpus or [])
        self.valid_ratio = valid_ratio

    def _pick_message(self, rng: random.Random) -> tuple[int, int]:
        if self.served and rng.random() < 0.8:
            key = rng.choice(sorted(self.served))
            lo, hi = self.served[key]
        else:
            key = rng.choice(sorted(self._classes))
            lo, hi = self._classes[key].VALID_VERSIONS
        return key, rng.randint(lo, hi)

    def frame(self, rng: random.Random, corr: int) -> mutators.Frame:
        key, version = self._pick_message(rng)
        cls = self._classes[key]
        body = strategies.random_message(cls, version, rng)
        if key == 0 and getattr(body, "acks", 1) == 0:
            body.acks = 1  # acks=0 Produce is the one request Kafka never answers
        if key == ApiKey.API_VERSIONS and version >= 3 and rng.random() < 0.7:
            body.client_software_name, body.client_software_version = "kraft-jbod-fuzz", "0.1"
        return mutators.build_frame(body, version, corr)

    def case(self, index: int) -> Case:
        rng = random.Random(f"{self.seed}:{index}")
        corr = index & 0x3FFFFFFF
        roll = rng.random()
        if self.corpus and roll < 0.15:
            data = rng.choice(self.corpus)
            frame = self._reframe(data, corr)
            if frame is not None:
                mutant = mutators.mutate(frame, rng)
                return Case(self.seed, index, mutant.data, mutant.ops, "corpus", frame.api_key, frame.api_version)
            mutant_data = bytearray(data)
            if mutant_data:
                mutant_data[rng.randrange(len(mutant_data))] ^= 1 << rng.randint(0, 7)
            return Case(self.seed, index, bytes(mutant_data), ["corpus_bitflip"], "corpus")
        for _ in range(4):  # a drawn value may not encode (rare); draw again from the same rng
            try:
                frame = self.frame(rng, corr)
                break
            except EncodeError:
                continue
        else:
            frame = mutators.build_frame(ApiVersionsRequest(), 0, corr)
        if roll < 0.15 + self.valid_ratio:
            return Case(self.seed, index, frame.framed(), [], "valid", frame.api_key, frame.api_version)
        mutant = mutators.mutate(frame, rng)
        return Case(self.seed, index, mutant.data, mutant.ops, "generated", frame.api_key, frame.api_version)

    def _reframe(self, data: bytes, corr: int) -> mutators.Frame | None:
        """A corpus entry that still decodes becomes a fresh frame with its sites."""
        split = mutators.split_frames(data)
        if not split.frames:
            return None
        try:
            decoded = codec.decode_request(split.frames[0])
            return mutators.build_frame(decoded.body, decoded.api_version, corr)
        except (DecodeError, EncodeError):
            return None


# --------------------------------------------------------------------------- the run


@dataclass(slots=True)
class Finding:
    outcome: Outcome
    detail: str
    case: Case
    history: list[bytes] = field(default_factory=list)
    minimized: bytes | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    suspects: list[Case] = field(default_factory=list)  # for a crash: other recent cases

    @property
    def signature(self) -> str:
        """Findings alike up to numbers (sizes, offsets, indexes) share a signature."""
        detail = re.sub(r"\d+", "N", self.detail.split("; stderr")[0])[:120]
        return f"{self.outcome}:{self.case.api_key}:{detail}"


@dataclass(slots=True)
class Report:
    seed: int
    cases: int = 0
    frames_sent: int = 0
    bytes_sent: int = 0
    elapsed: float = 0.0
    outcomes: Counter[str] = field(default_factory=Counter)
    error_codes: Counter[int] = field(default_factory=Counter)
    ops: Counter[str] = field(default_factory=Counter)
    findings: list[Finding] = field(default_factory=list)
    served: dict[int, tuple[int, int]] = field(default_factory=dict)
    rss: dict[str, int] = field(default_factory=dict)
    stopped_because: str = ""
    restarts: int = 0

    def summary(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "cases": self.cases,
            "frames_sent": self.frames_sent,
            "bytes_sent": self.bytes_sent,
            "elapsed_s": round(self.elapsed, 2),
            "outcomes": dict(sorted(self.outcomes.items())),
            "error_codes": {str(k): v for k, v in sorted(self.error_codes.items())},
            "findings": [
                {"outcome": str(f.outcome), "index": f.case.index, "detail": f.detail, "ops": f.case.ops}
                for f in self.findings
            ],
            "rss": self.rss,
            "stopped_because": self.stopped_because,
            "restarts": self.restarts,
            "served_api_keys": len(self.served),
        }


@dataclass(slots=True)
class RunConfig:
    host: str
    port: int
    seed: int = 0
    count: int = 1000
    time_limit: float = 60.0
    connections: int = 8
    timeout: float = 2.0
    allow_remote: bool = False
    max_findings_per_signature: int = 3
    max_findings: int = 50
    valid_ratio: float = 0.1
    start_index: int = 0


class TargetWatch:
    """What the runner needs from a local target process (see ``target.py``)."""

    def alive(self) -> bool:
        return True

    def exit_detail(self) -> str:
        return ""

    async def restart(self) -> tuple[str, int] | None:
        return None


class Judge:
    """Sends one case on a connection and classifies what the target does with it."""

    def __init__(self, host: str, port: int, timeout: float, watch: TargetWatch | None = None) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.watch = watch or TargetWatch()

    async def exchange(self, conn: Conn, case: Case) -> Result:
        """Send one case and judge what comes back (see the module docstring)."""
        split = mutators.split_frames(case.data)
        half_close = split.tail != "clean"
        try:
            await conn.send(case.data, half_close=half_close)
        except (ConnectionError, OSError) as exc:
            conn.dead = True
            if not self.watch.alive():
                return Result(Outcome.GONE, f"write failed and the target exited: {exc}")
            return Result(Outcome.CLOSED, f"write failed: {exc}")
        worst: Result | None = None
        answered = 0
        hexes: list[str] = []
        payloads: list[bytes] = []
        for frame in split.frames:
            try:
                payload = await conn.read_frame(self.timeout)
            except DecodeError as exc:
                conn.close()
                return Result(Outcome.BAD_ANSWER, str(exc), responses=answered, response_hex=hexes)
            except TimeoutError:
                return await self._after_timeout(conn, frame, answered, hexes, half_close)
            if payload is None:
                if not self.watch.alive():
                    return Result(Outcome.GONE, "connection closed and the target exited" + self.watch.exit_detail())
                return Result(Outcome.CLOSED, "closed", responses=answered, response_hex=hexes)
            answered += 1
            hexes.append(payload[:256].hex())
            payloads.append(payload)
            res = judge_response(frame, payload)
            if res.outcome is Outcome.BAD_ANSWER:
                conn.close()
                res.responses, res.response_hex = answered, hexes
                return res
            if worst is None or res.outcome is Outcome.ERROR_CODE:
                worst = res
        if half_close:
            # Every whole frame was answered; what follows is EOF from us, the server must close.
            if not await conn.wait_closed(self.timeout):
                conn.close()
                return Result(Outcome.TIMEOUT, f"no close within {self.timeout}s after an incomplete frame and EOF")
            conn.dead = True
            if not self.watch.alive():
                return Result(Outcome.GONE, "target exited" + self.watch.exit_detail())
            if worst is None:
                return Result(Outcome.CLOSED, f"closed ({split.tail} tail)", responses=answered, response_hex=hexes)
        if worst is None:  # a case with no complete frame and a clean tail: empty data
            return Result(Outcome.ANSWERED, "nothing to answer")
        worst.responses, worst.response_hex, worst.payloads = answered, hexes, payloads
        return worst

    async def _after_timeout(
        self, conn: Conn, frame: bytes, answered: int, hexes: list[str], half_closed: bool
    ) -> Result:
        if not self.watch.alive():
            conn.close()
            return Result(Outcome.GONE, "no answer and the target exited" + self.watch.exit_detail())
        key = codec.peek_request(frame)[0]
        name = codec.api_name(key)
        if key in LONG_POLL_KEYS:
            conn.close()
            return Result(Outcome.SLOW, f"{name}: long-polling api, no answer within {self.timeout}s")
        if not half_closed:
            try:
                await conn.send(api_versions_frame(0, PROBE_CORRELATION_ID))
                payload = await conn.read_frame(self.timeout)
            except (TimeoutError, DecodeError, OSError):
                payload = None
            if payload is not None and len(payload) >= 4 and _I32.unpack_from(payload, 0)[0] == PROBE_CORRELATION_ID:
                conn.close()
                return Result(Outcome.SILENT, f"{name}: no answer, yet a later ApiVersions on it was answered")
            if payload is not None:
                conn.close()
                return Result(Outcome.ANSWERED, f"{name}: answered after {self.timeout}s", responses=answered + 1)
        conn.close()
        state = await probe_server(self.host, self.port, self.timeout) if self.watch.alive() else "refused"
        if state == "refused" or not self.watch.alive():
            return Result(Outcome.GONE, f"{name}: no answer and the target is gone" + self.watch.exit_detail())
        return Result(Outcome.TIMEOUT, f"{name}: neither answered nor closed within {self.timeout}s")


class Runner:
    """Runs one bounded fuzzing session; ``on_case`` sees every (case, result)."""

    def __init__(
        self,
        config: RunConfig,
        *,
        watch: TargetWatch | None = None,
        corpus: list[bytes] | None = None,
        on_case: Callable[[Case, Result], object] | None = None,
        on_finding: Callable[[Finding], Awaitable[None]] | None = None,
        served: dict[int, tuple[int, int]] | None = None,
        progress: Callable[[Report], object] | None = None,
        progress_every: float = 10.0,
    ) -> None:
        check_loopback(config.host, config.allow_remote)
        self._progress = progress
        self._progress_every = progress_every
        self.config = config
        self.watch = watch or TargetWatch()
        self._corpus = corpus
        self._on_case = on_case
        self._on_finding = on_finding
        self._served = served
        self.report = Report(config.seed)
        self._next = itertools.count(config.start_index)
        self._deadline = 0.0
        self._stop = False
        self._signatures: Counter[str] = Counter()
        self._gone_lock = asyncio.Lock()
        self._epoch = 0  # bumped on each restart of the target
        self.factory: CaseFactory | None = None
        self.judge = Judge(config.host, config.port, config.timeout, self.watch)
        # The last cases sent by any worker: a crash may come from a frame already "answered".
        self.recent: collections.deque[Case] = collections.deque(maxlen=32)

    def _take(self) -> int | None:
        if self._stop or time.monotonic() > self._deadline:
            if not self.report.stopped_because:
                self.report.stopped_because = "stopped" if self._stop else "time limit"
            return None
        index = next(self._next)
        if index >= self.config.start_index + self.config.count:
            self.report.stopped_because = self.report.stopped_because or "count"
            return None
        return index

    async def run(self) -> Report:
        cfg = self.config
        start = time.monotonic()
        self._deadline = start + cfg.time_limit
        served = self._served
        if served is None:
            served = await fetch_api_versions(cfg.host, cfg.port, cfg.timeout)
        self.report.served = served
        self.factory = CaseFactory(cfg.seed, served, self._corpus, valid_ratio=cfg.valid_ratio)
        workers = [asyncio.create_task(self._worker()) for _ in range(max(1, cfg.connections))]
        ticker = asyncio.create_task(self._progress_loop(start)) if self._progress is not None else None
        try:
            await asyncio.gather(*workers)
        finally:
            for w in workers:
                w.cancel()
            if ticker is not None:
                ticker.cancel()
        self.report.elapsed = time.monotonic() - start
        return self.report

    async def _progress_loop(self, start: float) -> None:
        assert self._progress is not None
        while True:
            await asyncio.sleep(self._progress_every)
            self.report.elapsed = time.monotonic() - start
            self._progress(self.report)

    async def _connect(self) -> Conn | None:
        cfg = self.config
        for _ in range(3):
            try:
                return await Conn.open(cfg.host, cfg.port, cfg.timeout)
            except (OSError, TimeoutError):
                if not self.watch.alive():
                    return None
                await asyncio.sleep(0.05)
        return None

    async def _worker(self) -> None:
        conn: Conn | None = None
        last: Case | None = None
        try:
            while (index := self._take()) is not None:
                assert self.factory is not None
                case = self.factory.case(index)
                while conn is None or conn.dead:
                    if conn is not None:
                        conn.close()
                    conn = await self._connect()
                    if conn is None:
                        # The server stopped accepting: blame what this worker sent last,
                        # then send this case to the restarted target (no index is skipped).
                        await self._gone(last or case, "target refuses connections")
                        if self._stop:
                            return
                self.recent.append(case)
                result = await self.judge.exchange(conn, case)
                last = case
                await self._account(case, result, conn)
                if result.outcome is Outcome.GONE:
                    conn.close()
                    conn = None
        finally:
            if conn is not None:
                conn.close()

    async def _account(self, case: Case, result: Result, conn: Conn) -> None:
        rep = self.report
        rep.cases += 1
        rep.frames_sent += max(1, len(mutators.split_frames(case.data).frames))
        rep.bytes_sent += len(case.data)
        rep.outcomes[str(result.outcome)] += 1
        for op in case.ops:
            rep.ops[op] += 1
        if result.error_code is not None:
            rep.error_codes[result.error_code] += 1
        if self._on_case is not None:
            self._on_case(case, result)
        if result.outcome in FINDING_OUTCOMES:
            finding = Finding(result.outcome, result.detail, case, list(conn.history[:-1]))
            if result.outcome is Outcome.GONE:
                finding.suspects = [c for c in self.recent if c is not case]
            await self._record(finding)
        if result.outcome is Outcome.GONE:
            await self._gone(None, "")

    async def _record(self, finding: Finding) -> None:
        sig = finding.signature
        self._signatures[sig] += 1
        if self._signatures[sig] > self.config.max_findings_per_signature:
            return
        if len(self.report.findings) >= self.config.max_findings:
            return
        self.report.findings.append(finding)
        if self._on_finding is not None:
            await self._on_finding(finding)

    async def _gone(self, case: Case | None, detail: str) -> None:
        """The target died: record it (once per death) and restart it or stop the run."""
        epoch = self._epoch
        async with self._gone_lock:
            if epoch != self._epoch or self._stop:
                return  # another worker already handled this death
            if case is not None:
                finding = Finding(Outcome.GONE, detail + self.watch.exit_detail(), case)
                finding.suspects = [c for c in self.recent if c is not case]
                await self._record(finding)
            addr = await self.watch.restart()
            if addr is None:
                self._stop = True
                self.report.stopped_because = "target gone"
                return
            self.report.restarts += 1
            self.config.host, self.config.port = addr
            self.judge.host, self.judge.port = addr
            self._epoch += 1


async def replay(host: str, port: int, data: bytes, timeout: float = 2.0, watch: TargetWatch | None = None) -> Result:
    """Send ``data`` on a fresh connection and judge it as the runner does."""
    judge = Judge(host, port, timeout, watch)
    try:
        conn = await Conn.open(host, port, timeout)
    except (OSError, TimeoutError) as exc:
        return Result(Outcome.GONE, f"cannot connect: {exc}")
    try:
        return await judge.exchange(conn, Case(0, 0, data, [], "replay"))
    finally:
        conn.close()
