"""pytest plugin: a KRaft controller, simulated JBOD brokers and fault injection as fixtures.

Enabled by the ``pytest11`` entry point ``kraft_jbod = "kraft_jbod.pytest_plugin"`` (or
``pytest -p kraft_jbod.pytest_plugin``). Fixtures (all function-scoped, async under
pytest-asyncio):

It never breaks a run: without pytest-asyncio installed the plugin still loads, every
test that does not ask for a ``kraft_*`` fixture runs as before, and one that does fails
alone with a line naming what to install. No configuration is needed either: an
``async def`` test that asks for a ``kraft_*`` fixture is marked ``asyncio`` by the
plugin, so ``asyncio_mode = "strict"`` (pytest-asyncio's default) works as ``auto`` does.

* ``kraft_clock``: a :class:`~kraft_jbod.clock.ManualClock`; the controller's session
  timeouts and tick loop run on it, so ``await cluster.advance(ms)`` replaces sleeping.
* ``kraft_cluster``: a started controller on 127.0.0.1 port 0 with a client listener
  (Metadata/DescribeCluster for real clients) and the admin/metrics HTTP endpoint; a
  :class:`KraftCluster` handle. Everything is closed at teardown.
* ``kraft_faults``: the cluster's :class:`~kraft_jbod.faults.FaultInjector`.
* ``kraft_fake_brokers``: a factory, ``await kraft_fake_brokers(3)``, starting real fake
  brokers (:meth:`KraftCluster.start_broker`).
* ``kraft_quorum``: three raft voters on 127.0.0.1 with failover on demand (kill, pause,
  isolate, move leadership, wait for the next leader): a started
  :class:`~kraft_jbod.testing.quorum.LocalQuorum`, stopped at teardown.

Two kinds of broker:

* :class:`SimBroker` (``cluster.add_broker``) is scripted: it registers with directories,
  heartbeats only when the test says so (optionally reporting directories offline) and
  assigns replicas on demand.
* :class:`FakeBrokerHandle` (``cluster.start_broker``) wraps a real
  :class:`~kraft_jbod.broker.server.FakeBroker`: storage formatted on disk under the
  cluster's temporary folder, registration with its LogDirs, metadata replication by
  Fetch, replica folders, AssignReplicasToDirs, a probe that notices a removed directory,
  and its control endpoint. Its directories can be failed for real or by command.

Both advertise the client listener as their endpoint, so real clients that follow the
broker list land on the same listener.

Time: the controller runs on the manual clock, the fake brokers on real time (their
heartbeats, probes and backoffs are real sleeps). A broker's session is measured on the
manual clock, so while it stands still no session expires, however long the test runs;
``await cluster.advance(ms)`` past ``broker.session.timeout.ms`` fences every broker whose last
heartbeat is older on that clock, fake ones included, and a running fake broker is
unfenced again by its next heartbeat (within ``broker.heartbeat.interval.ms``, 200 ms
here, of real time).

Loading is lazy: pytest imports this module in every run of an environment where
kraft-jbod is installed, so it imports only pytest (and pytest-asyncio, which pytest has
loaded already). A fixture imports what it needs when a test first asks for it: the
cluster machinery lives in :mod:`kraft_jbod.testing.cluster`, and the names it defines
(``KraftCluster``, ``SimBroker``, ``start_cluster``...) are still importable from here,
resolved on first access. A new fixture follows the same pattern: a plain function here
whose body imports its implementation module.

Invariants: every wait is bounded (``wait_for`` polls at most ``attempts`` loop turns and
fails with the last observed value; broker waits have a deadline in seconds); nothing
binds outside 127.0.0.1; every broker a cluster started is closed before its controller
and before its folders are removed.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

try:  # the fixtures are async; without pytest-asyncio they explain themselves (see below)
    import pytest_asyncio
except ImportError:  # pragma: no cover - exercised by the fresh-venv test
    pytest_asyncio = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from kraft_jbod.clock import ManualClock
    from kraft_jbod.faults import FaultInjector
    from kraft_jbod.testing.cluster import (
        CLUSTER_ID,
        FakeBrokerFactory,
        FakeBrokerHandle,
        KafkaConnection,
        KraftCluster,
        SimBroker,
        controller_config,
        directory_id,
        start_cluster,
        stop_cluster,
    )
    from kraft_jbod.testing.quorum import LocalQuorum

__all__ = [
    "CLUSTER_ID",
    "NEEDS_PYTEST_ASYNCIO",
    "FakeBrokerFactory",
    "FakeBrokerHandle",
    "KafkaConnection",
    "KraftCluster",
    "LocalQuorum",
    "SimBroker",
    "controller_config",
    "directory_id",
    "kraft_clock",
    "kraft_cluster",
    "kraft_fake_brokers",
    "kraft_faults",
    "kraft_quorum",
    "kraft_real_cluster",
    "start_cluster",
    "stop_cluster",
]

# Names the cluster machinery defines, imported from it on first access (PEP 562), so
# `from kraft_jbod.pytest_plugin import KraftCluster` keeps working without making every
# pytest run pay for the controller.
_LAZY = {
    name: "kraft_jbod.testing.cluster"
    for name in (
        "CLUSTER_ID",
        "FakeBrokerFactory",
        "FakeBrokerHandle",
        "KafkaConnection",
        "KraftCluster",
        "SimBroker",
        "controller_config",
        "directory_id",
        "start_cluster",
        "stop_cluster",
    )
}
_LAZY["LocalQuorum"] = "kraft_jbod.testing.quorum"


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


_FIXTURES = ("kraft_cluster", "kraft_faults", "kraft_fake_brokers", "kraft_clock", "kraft_quorum")
NEEDS_PYTEST_ASYNCIO = (
    "the kraft_cluster fixture runs a controller on an asyncio loop and needs pytest-asyncio: "
    "pip install pytest-asyncio (or pip install 'kraft-jbod[test]')"
)


@pytest.fixture
def kraft_clock() -> ManualClock:
    from kraft_jbod.clock import ManualClock

    return ManualClock()


kraft_cluster: Any  # the fixture, importable by name (conftest files re-export it)
if pytest_asyncio is not None:

    @pytest_asyncio.fixture(name="kraft_cluster")
    async def _kraft_cluster(kraft_clock: ManualClock) -> AsyncIterator[KraftCluster]:
        from kraft_jbod.testing.cluster import cluster_for_test

        async for cluster in cluster_for_test(kraft_clock):
            yield cluster

    kraft_cluster = _kraft_cluster

else:  # pragma: no cover - exercised by the fresh-venv test

    @pytest.fixture(name="kraft_cluster")
    def _kraft_cluster_unavailable() -> KraftCluster:
        pytest.fail(NEEDS_PYTEST_ASYNCIO, pytrace=False)

    kraft_cluster = _kraft_cluster_unavailable


kraft_quorum: Any  # the fixture, importable by name
if pytest_asyncio is not None:

    @pytest_asyncio.fixture(name="kraft_quorum")
    async def _kraft_quorum(tmp_path: Path) -> AsyncIterator[LocalQuorum]:
        from kraft_jbod.testing.quorum import LocalQuorum

        async with LocalQuorum(tmp_path / "quorum") as quorum:
            yield quorum

    kraft_quorum = _kraft_quorum

else:  # pragma: no cover - exercised by the fresh-venv test

    @pytest.fixture(name="kraft_quorum")
    def _kraft_quorum_unavailable() -> LocalQuorum:
        pytest.fail(NEEDS_PYTEST_ASYNCIO, pytrace=False)

    kraft_quorum = _kraft_quorum_unavailable


@pytest.fixture
def kraft_faults(kraft_cluster: KraftCluster) -> FaultInjector:
    return kraft_cluster.faults


@pytest.fixture
def kraft_fake_brokers(kraft_cluster: KraftCluster) -> FakeBrokerFactory:
    from kraft_jbod.testing.cluster import FakeBrokerFactory

    return FakeBrokerFactory(kraft_cluster)


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: Any, name: str, obj: Any) -> None:
    """Mark ``async def`` tests that use our fixtures as asyncio tests (strict mode needs it).

    Runs before pytest-asyncio looks at the function, so its strict mode sees the marker
    just as if the user had written ``@pytest.mark.asyncio``.
    """
    import inspect

    if pytest_asyncio is None or not inspect.iscoroutinefunction(obj) or not collector.funcnamefilter(name):
        return
    try:
        params = inspect.signature(obj).parameters
    except (TypeError, ValueError):
        return
    if any(p in params for p in _FIXTURES) and not any(
        getattr(m, "name", None) == "asyncio" for m in getattr(obj, "pytestmark", [])
    ):
        pytest.mark.asyncio(obj)


@pytest.fixture
def kraft_real_cluster(tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """A factory of clusters of real Kafka brokers (the mock or Kafka's controller).

    ``cluster = kraft_real_cluster(brokers=2, log_dirs=2)``; synchronous (the nodes are
    processes). Skipped with the reason without Java or a Kafka distribution
    (:mod:`kraft_jbod.realkafka.fixture`, docs/real-brokers.md). Imported on first use.
    """
    from kraft_jbod.realkafka.fixture import real_cluster_factory

    yield from real_cluster_factory(tmp_path)
