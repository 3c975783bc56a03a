"""Stateful fuzzing of a KRaft controller: broker lifecycles with hostile steps mixed in.

Strategy:

* One session plays one broker: DescribeCluster (for the cluster id) → BrokerRegistration
  with two log directories → BrokerHeartbeat until unfenced → CreateTopics →
  AssignReplicasToDirs → BrokerHeartbeat with one directory offline (a failed disk) →
  a last heartbeat. Every value comes from ``random.Random(f"{seed}:stateful:{n}")``.
* With probability ``mutate_ratio`` a step is first sent *mutated* (``mutators.mutate``
  on that step's frame) and the real step follows on a fresh connection when the server
  closed; with ``hostile_ratio`` the step is sent well-formed but with hostile values
  (a stale or negative epoch, reserved directory ids, duplicated directories, unknown
  topic ids, an offline directory the broker never registered).
* Judging: every frame is judged as in the runner (answered / error code / closed /
  timeout / gone / bad answer). On top, the *unmutated* path has expectations (not
  applied to a step whose mutated twin the server accepted, since that may have
  changed the broker's state):
  registration answers error 0 with an epoch ≥ 0; a heartbeat at that epoch never
  answers STALE_BROKER_EPOCH (77); the broker is unfenced within ``max_heartbeats``; a
  well-formed request is answered rather than the connection closed. A broken
  expectation is a ``violation`` (a wrong answer).
* Sessions run ``concurrency`` at a time with distinct broker ids; the whole run is bounded
  by ``sessions`` and ``time_limit``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kraft_jbod import codec
from kraft_jbod.errors import DecodeError, EncodeError
from kraft_jbod.fuzz import mutators
from kraft_jbod.fuzz.runner import (
    Case,
    Conn,
    Judge,
    Outcome,
    Result,
    TargetWatch,
    api_versions_frame,
    check_loopback,
    fetch_api_versions,
)
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.api_versions_response import ApiVersionsResponse
from kraft_jbod.messages.assign_replicas_to_dirs_request import (
    AssignReplicasToDirsRequest,
    DirectoryData,
    PartitionData,
    TopicData,
)
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.broker_registration_request import BrokerRegistrationRequest, Feature, Listener
from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kraft_jbod.messages.describe_cluster_request import DescribeClusterRequest
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.wire.message import Message
from kraft_jbod.wire.primitives import LOST_DIRECTORY, MIGRATING_DIRECTORY, UNASSIGNED_DIRECTORY

_RESERVED = (UNASSIGNED_DIRECTORY, LOST_DIRECTORY, MIGRATING_DIRECTORY)


@dataclass(slots=True)
class Violation:
    session: int
    step: str
    detail: str
    hex: str


@dataclass(slots=True)
class StatefulReport:
    seed: int
    sessions: int = 0
    steps: int = 0
    frames_sent: int = 0
    elapsed: float = 0.0
    outcomes: Counter[str] = field(default_factory=Counter)
    per_step: Counter[str] = field(default_factory=Counter)
    unfenced: int = 0
    violations: list[Violation] = field(default_factory=list)
    findings: list[tuple[str, Case, Result]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "sessions": self.sessions,
            "steps": self.steps,
            "frames_sent": self.frames_sent,
            "elapsed_s": round(self.elapsed, 2),
            "outcomes": dict(sorted(self.outcomes.items())),
            "unfenced_brokers": self.unfenced,
            "violations": [dataclasses.asdict(v) for v in self.violations[:20]],
            "findings": [
                {"step": s, "outcome": str(r.outcome), "detail": r.detail, "hex": c.data.hex()}
                for s, c, r in self.findings[:20]
            ],
        }


@dataclass(slots=True)
class StatefulConfig:
    host: str
    port: int
    seed: int = 0
    sessions: int = 20
    concurrency: int = 4
    time_limit: float = 60.0
    timeout: float = 2.0
    mutate_ratio: float = 0.25
    hostile_ratio: float = 0.2
    max_heartbeats: int = 10
    allow_remote: bool = False
    first_broker_id: int = 1000


class _Session:
    def __init__(self, run: StatefulRunner, n: int) -> None:
        self.run = run
        self.n = n
        self.rng = random.Random(f"{run.config.seed}:stateful:{n}")
        self.broker_id = run.config.first_broker_id + n
        self.conn: Conn | None = None
        self.corr = 0
        self.epoch = -1
        self.tainted = False
        self.dirs = [uuid.UUID(int=self.rng.getrandbits(128) | (1 << 100)) for _ in range(2)]

    async def _conn(self) -> Conn | None:
        if self.conn is None or self.conn.dead:
            if self.conn is not None:
                self.conn.close()
            try:
                self.conn = await Conn.open(self.run.config.host, self.run.config.port, self.run.config.timeout)
            except (OSError, TimeoutError):
                self.conn = None
        return self.conn

    async def send(self, step: str, body: Message, version: int, *, well_formed_path: bool) -> Result | None:
        """Send one step (maybe mutated first); the judged result of the well-formed frame."""
        rep = self.run.report
        cfg = self.run.config
        self.corr += 1
        try:
            frame = mutators.build_frame(body, version, self.corr)
        except EncodeError as exc:
            rep.violations.append(Violation(self.n, step, f"our own request does not encode: {exc}", ""))
            return None
        self.tainted = False
        if self.rng.random() < cfg.mutate_ratio:
            mutant = mutators.mutate(frame, self.rng)
            got = await self._exchange(f"{step}:mutated", Case(cfg.seed, self.n, mutant.data, mutant.ops, "stateful"))
            # A mutant the server accepted may have changed state (another incarnation id,
            # other directories): the clean step's expectations no longer apply to it.
            self.tainted = got is not None and got.outcome in (Outcome.ANSWERED, Outcome.ERROR_CODE)
            if self.tainted:
                self.run.note_claims(mutant.data)
            if self.conn is not None and self.conn.dead:
                self.conn.close()
                self.conn = None
        result = await self._exchange(step, Case(cfg.seed, self.n, frame.framed(), [], "stateful", frame.api_key))
        if result is None:
            return None
        if well_formed_path and result.outcome in (Outcome.CLOSED, Outcome.SILENT):
            rep.violations.append(
                Violation(self.n, step, f"well-formed request not answered: {result.detail}", frame.framed().hex())
            )
        return result

    async def _exchange(self, step: str, case: Case) -> Result | None:
        rep = self.run.report
        conn = await self._conn()
        if conn is None:
            rep.outcomes[str(Outcome.GONE)] += 1
            self.run.gone = True
            return None
        result = await self.run.judge.exchange(conn, case)
        rep.steps += 1
        rep.frames_sent += max(1, len(mutators.split_frames(case.data).frames))
        rep.outcomes[str(result.outcome)] += 1
        rep.per_step[f"{step}:{result.outcome}"] += 1
        if result.outcome in (Outcome.TIMEOUT, Outcome.GONE, Outcome.BAD_ANSWER):
            rep.findings.append((step, case, result))
            if result.outcome is Outcome.GONE:
                self.run.gone = True
        return result

    def _body(self, result: Result | None, key: int, version: int) -> Any:
        if result is None or not result.payloads:
            return None
        try:
            return codec.decode_response(result.payloads[-1], key, version).body
        except DecodeError:
            return None

    def _version(self, key: int, default: int) -> int:
        """A version of ``key`` the target serves: the newest, or 30 % of the time any."""
        lo, hi = self.run.served.get(key, (default, default))
        return self.rng.randint(lo, hi) if self.rng.random() < 0.3 else hi

    async def play(self) -> None:
        """One broker's life: describe the cluster, register, heartbeat until unfenced,
        create a topic and assign its replicas, then report a directory offline. Each
        step may send a hostile variant; a step that fails ends the session."""
        v = self._version(60, 0)
        res = await self.send("describe_cluster", DescribeClusterRequest(), v, well_formed_path=True)
        dc = self._body(res, 60, v)
        cluster_id = getattr(dc, "cluster_id", "") or ""
        if not await self._register(cluster_id):
            return
        if not await self._heartbeat_until_unfenced():
            return
        self.run.report.unfenced += 1
        await self._create_and_assign()
        await self._fail_directory()

    async def _register(self, cluster_id: str) -> bool:
        """Register (sometimes with hostile directories); True once an epoch is granted."""
        rng = self.rng
        rep = self.run.report
        hostile = rng.random() < self.run.config.hostile_ratio
        reg_dirs = list(self.dirs)
        if hostile:
            reg_dirs = rng.choice(
                ([rng.choice(_RESERVED), *self.dirs], [self.dirs[0], self.dirs[0]], [], [uuid.UUID(int=0)])
            )
        # LogDirs exist from v2; a JBOD metadata.version refuses a registration without them.
        v = self._version(62, 0) if hostile else max(2, self._version(62, 2))
        reg = BrokerRegistrationRequest(
            broker_id=self.broker_id,
            cluster_id=cluster_id,
            incarnation_id=uuid.UUID(int=rng.getrandbits(128)),
            listeners=[Listener("PLAINTEXT", "127.0.0.1", 19092 + self.n % 1000, 0)],
            # Every finalized feature must be listed (Kafka's rule); metadata.version as a range.
            features=[Feature("metadata.version", 1, self.run.metadata_level or 1)]
            + [Feature(n, lvl, lvl) for n, lvl in sorted(self.run.other_features.items())],
            rack=None,
            log_dirs=reg_dirs if v >= 2 else [],
        )
        res = await self.send("register", reg, v, well_formed_path=True)
        body = self._body(res, 62, v)
        if body is None:
            return False
        if body.error_code != 0:
            # Another session's accepted mutant may have registered our id or our dirs
            # (a flipped bit in its BrokerId): then the refusal is right, not a violation.
            claimed = self.broker_id in self.run.claimed_ids or any(d in self.run.claimed_dirs for d in self.dirs)
            if not hostile and not self.tainted and not claimed:
                rep.violations.append(
                    Violation(self.n, "register", f"error {body.error_code} on a clean registration", "")
                )
            return False
        self.epoch = int(body.broker_epoch)
        if self.epoch < 0:
            rep.violations.append(Violation(self.n, "register", f"negative broker epoch {self.epoch}", ""))
            return False
        return True

    async def _heartbeat_until_unfenced(self) -> bool:
        """Heartbeat as a caught-up broker; True once unfenced. A clean session still
        fenced after the last heartbeat, or told its new epoch is stale, is a violation."""
        rep = self.run.report
        tainted_any = False
        for i in range(self.run.config.max_heartbeats):
            v = self._version(63, 0)
            hb = BrokerHeartbeatRequest(
                broker_id=self.broker_id, broker_epoch=self.epoch, current_metadata_offset=1 << 40
            )
            res = await self.send(f"heartbeat{min(i, 2)}", hb, v, well_formed_path=True)
            b = self._body(res, 63, v)
            if b is None:
                return False
            tainted_any = tainted_any or self.tainted
            if b.error_code == ErrorCode.STALE_BROKER_EPOCH and not tainted_any:
                rep.violations.append(
                    Violation(self.n, "heartbeat", "STALE_BROKER_EPOCH at the epoch just granted", "")
                )
                return False
            if not b.is_fenced:
                return True
            await asyncio.sleep(0.01)
        if not tainted_any:
            rep.violations.append(Violation(self.n, "heartbeat", "still fenced after caught-up heartbeats", ""))
        return False

    async def _create_and_assign(self) -> None:
        """Create a topic, then assign two of its replicas to a directory (sometimes a
        reserved or unknown one, at a wrong epoch, for a wrong topic)."""
        rng = self.rng
        v = self._version(19, 7)
        name = f"fz-{self.run.config.seed}-{self.n}"
        ct = CreateTopicsRequest(
            topics=[CreatableTopic(name=name, num_partitions=rng.randint(1, 3), replication_factor=1)]
        )
        res = await self.send("create_topic", ct, v, well_formed_path=True)
        created = self._body(res, 19, v)
        topic_id = uuid.UUID(int=rng.getrandbits(128))
        if created is not None and created.topics and getattr(created.topics[0], "topic_id", None):
            topic_id = created.topics[0].topic_id

        target_dir = self.dirs[1]
        epoch = self.epoch
        if rng.random() < self.run.config.hostile_ratio:
            target_dir = rng.choice((*_RESERVED, uuid.UUID(int=rng.getrandbits(128))))
            epoch = rng.choice((self.epoch - 1, -1, self.epoch + 100))
            topic_id = rng.choice((topic_id, uuid.UUID(int=0), uuid.UUID(int=rng.getrandbits(128))))
        ar = AssignReplicasToDirsRequest(
            broker_id=self.broker_id,
            broker_epoch=epoch,
            directories=[
                DirectoryData(
                    id=target_dir,
                    topics=[TopicData(topic_id=topic_id, partitions=[PartitionData(0), PartitionData(1)])],
                )
            ],
        )
        await self.send("assign", ar, 0, well_formed_path=True)

    async def _fail_directory(self) -> None:
        """Report a directory offline (sometimes reserved, unknown or repeated ones), twice."""
        rng = self.rng
        offline = [self.dirs[0]]
        if rng.random() < self.run.config.hostile_ratio:
            offline = rng.choice(([*_RESERVED], [uuid.UUID(int=rng.getrandbits(128))], self.dirs, [self.dirs[0]] * 3))
        v = max(1, self._version(63, 1))
        hb = BrokerHeartbeatRequest(
            broker_id=self.broker_id, broker_epoch=self.epoch, current_metadata_offset=1 << 40, offline_log_dirs=offline
        )
        await self.send("fail_dir", hb, v, well_formed_path=True)
        hb = BrokerHeartbeatRequest(
            broker_id=self.broker_id, broker_epoch=self.epoch, current_metadata_offset=1 << 40, offline_log_dirs=offline
        )
        await self.send("after_fail", hb, v, well_formed_path=True)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


class StatefulRunner:
    def __init__(self, config: StatefulConfig, *, watch: TargetWatch | None = None) -> None:
        check_loopback(config.host, config.allow_remote)
        self.config = config
        self.watch = watch or TargetWatch()
        self.judge = Judge(config.host, config.port, config.timeout, self.watch)
        self.report = StatefulReport(config.seed)
        self.served: dict[int, tuple[int, int]] = {}
        self.metadata_level = 0
        self.other_features: dict[str, int] = {}  # finalized features besides metadata.version
        self.gone = False
        self.claimed_ids: set[int] = set()
        self.claimed_dirs: set[uuid.UUID] = set()

    def note_claims(self, data: bytes) -> None:
        """Broker ids and directories an accepted mutant may have registered."""
        for payload in mutators.split_frames(data).frames:
            try:
                body = codec.decode_request(payload).body
            except DecodeError:
                continue
            if isinstance(body, BrokerRegistrationRequest):
                self.claimed_ids.add(int(body.broker_id))
                self.claimed_dirs.update(body.log_dirs)

    async def _metadata_level(self) -> int:
        try:
            conn = await Conn.open(self.config.host, self.config.port, self.config.timeout)
        except (OSError, TimeoutError):
            return 0
        try:
            await conn.send(api_versions_frame(3, 1))
            payload = await conn.read_frame(self.config.timeout)
            if payload is None:
                return 0
            body: ApiVersionsResponse = codec.decode_response(payload, ApiKey.API_VERSIONS, 3).body
            level = 0
            for f in body.finalized_features:
                if f.name == "metadata.version":
                    level = int(f.max_version_level)
                elif f.max_version_level > 0:
                    self.other_features[f.name] = int(f.max_version_level)
            return level
        except (DecodeError, TimeoutError, OSError):
            return 0
        finally:
            conn.close()
        return 0

    async def run(self) -> StatefulReport:
        cfg = self.config
        start = time.monotonic()
        self.served = await fetch_api_versions(cfg.host, cfg.port, cfg.timeout)
        self.metadata_level = await self._metadata_level()
        next_session = iter(range(cfg.sessions))

        async def worker() -> None:
            for n in next_session:
                if self.gone or time.monotonic() - start > cfg.time_limit:
                    return
                s = _Session(self, n)
                try:
                    await s.play()
                finally:
                    s.close()
                self.report.sessions += 1

        await asyncio.gather(*(worker() for _ in range(max(1, cfg.concurrency))))
        self.report.elapsed = time.monotonic() - start
        return self.report
