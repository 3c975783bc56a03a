"""The mock and Kafka's own KRaft controller given the same random request sequences.

``KRAFT_JBOD_TWIN_EXAMPLES`` (sequences per metadata.version), ``KRAFT_JBOD_TWIN_STEPS``
(steps per sequence) and ``KRAFT_JBOD_TWIN_SEED`` (a random seed instead of CI's fixed
derandomized one) make the long run by hand; docs/twin.md has the command.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hseed
from hypothesis.stateful import run_state_machine_as_test

from kraft_jbod.realkafka.distribution import KafkaDistribution
from tests.twin.machine import TOTALS, TwinMachine
from tests.twin.pair import Pair

EXAMPLES = int(os.environ.get("KRAFT_JBOD_TWIN_EXAMPLES", "0"))
STEPS = int(os.environ.get("KRAFT_JBOD_TWIN_STEPS", "30"))
SEED = os.environ.get("KRAFT_JBOD_TWIN_SEED")
SHRINK = os.environ.get("KRAFT_JBOD_TWIN_SHRINK", "1") != "0"
# metadata.version -> sequences in CI: the default level gets most of the budget.
LEVELS = {"4.3-IV0": 14, "4.1-IV0": 5, "3.7-IV2": 4}


@pytest.fixture(scope="module", params=list(LEVELS))
def pair(
    request: pytest.FixtureRequest, kafka_dist: KafkaDistribution, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Pair]:
    p = Pair(kafka_dist, tmp_path_factory.mktemp("twin"), metadata_version=request.param)
    try:
        p.start()
        yield p
    finally:
        p.close()


def test_random_sequences_agree(pair: Pair) -> None:
    examples = EXAMPLES or LEVELS[pair.metadata_version]
    TwinMachine.pair = pair
    run = settings(
        max_examples=examples,
        stateful_step_count=STEPS,
        deadline=None,
        derandomize=SEED is None,
        print_blob=True,
        suppress_health_check=list(HealthCheck),
        # KRAFT_JBOD_TWIN_SHRINK=0 reports the first disagreement as found (quicker to triage)
        phases=[Phase.explicit, Phase.reuse, Phase.generate] + ([Phase.shrink] if SHRINK else []),
    )
    machine = TwinMachine.TestCase
    machine.settings = run
    if SEED is not None:
        print(f"twin seed {SEED}")
        hseed(int(SEED))(machine)
    before = dict(TOTALS)
    run_state_machine_as_test(TwinMachine, settings=run)
    print(
        f"twin {pair.metadata_version}: {TOTALS['sequences'] - before['sequences']} sequences, "
        f"{TOTALS['steps'] - before['steps']} steps (teardown included), {pair.starts} controller pair start(s)"
    )
