"""Copy me: tests against a KRaft controller with JBOD brokers, faults and real clients.

Scripted brokers (``add_broker``) do exactly what the test says; real fake brokers
(``kraft_fake_brokers`` / ``start_broker``) format directories on disk, replicate the
metadata log, place replicas themselves and notice a removed directory.

Run with ``pytest examples/test_example.py`` once kraft-jbod is installed (its pytest11
entry point loads the fixtures); without the entry point add ``-p kraft_jbod.pytest_plugin``
(not both: pytest refuses to register the plugin twice).
"""

from __future__ import annotations

from kraft_jbod.pytest_plugin import FakeBrokerFactory, KraftCluster


async def test_directory_failure_moves_leadership(kraft_cluster: KraftCluster) -> None:
    for broker_id in (1, 2):
        await kraft_cluster.add_broker(broker_id, dirs=2)
    assert (await kraft_cluster.create_topic("payments", partitions=1, replication_factor=2)).error_code == 0
    await kraft_cluster.assign_all()  # brokers place their replicas (AssignReplicasToDirs)

    before = kraft_cluster.partition("payments", 0)
    leader = kraft_cluster.brokers[before["leader"]]
    directory = before["directories"][before["replicas"].index(leader.broker_id)]
    await leader.fail_directory(leader.directory_index(directory))

    after = kraft_cluster.partition("payments", 0)
    assert after["leader"] != before["leader"]
    assert leader.broker_id not in after["isr"]


async def test_real_fake_brokers_lose_a_disk(
    kraft_cluster: KraftCluster, kraft_fake_brokers: FakeBrokerFactory
) -> None:
    # Two real fake brokers (ids 1 and 2), each with two formatted log directories on disk.
    await kraft_fake_brokers(2)
    assert (await kraft_cluster.create_topic("orders", partitions=1, replication_factor=2)).error_code == 0
    await kraft_cluster.wait_for_placement("orders")  # the brokers place replicas themselves

    before = kraft_cluster.partition("orders", 0)
    leader = kraft_cluster.fake_brokers[before["leader"]]
    index = leader.directory_of("orders", 0)
    # rm -rf the leader's directory: its probe notices, its heartbeat reports it offline.
    # (how="command" fails it through the broker's control endpoint instead.)
    await leader.fail_directory(index, how="remove")

    after = kraft_cluster.partition("orders", 0)
    assert after["leader"] not in (leader.broker_id, -1)
    new_leader = kraft_cluster.fake_brokers[after["leader"]]
    assert new_leader.online_in_controller(new_leader.directory_of("orders", 0))  # a healthy directory
    broker_view = next(b for b in kraft_cluster.view()["brokers"] if b["id"] == leader.broker_id)
    assert [d["online"] for d in broker_view["directories"]].count(False) == 1


async def test_session_timeout_without_sleeping(kraft_cluster: KraftCluster) -> None:
    await kraft_cluster.add_broker(1)
    await kraft_cluster.advance(kraft_cluster.server.config.session_timeout_ms + 1000)
    await kraft_cluster.wait_for(lambda: kraft_cluster.view()["brokers"][0]["fenced"])


async def test_inject_a_fault(kraft_cluster: KraftCluster) -> None:
    broker = await kraft_cluster.add_broker(1)
    kraft_cluster.add_fault(
        {
            "match": {"api": "BrokerHeartbeat", "broker_id": 1},
            "action": {"type": "error", "error_code": 7},
            "trigger": {"type": "nth", "n": 2},
        }
    )
    assert (await broker.heartbeat()).error_code == 0
    assert (await broker.heartbeat()).error_code == 7  # REQUEST_TIMED_OUT on the 2nd heartbeat
    assert (await broker.heartbeat()).error_code == 0
