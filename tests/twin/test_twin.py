"""The mock and Kafka's own KRaft controller given the same random request sequences.

Every run is seeded: in CI by the metadata.version (so each level sees other sequences, and a
rerun sees the same ones), by hand by ``KRAFT_JBOD_TWIN_SEED``. A failure names its seed;
the same seed, example count and step count replay it. ``KRAFT_JBOD_TWIN_EXAMPLES``
(sequences per metadata.version), ``KRAFT_JBOD_TWIN_STEPS`` (rules per sequence, besides the
start and the teardown), ``KRAFT_JBOD_TWIN_LEVELS`` (comma-separated metadata.versions) and
``KRAFT_JBOD_TWIN_SHRINK=0`` (report the first disagreement unshrunk) make the long run by
hand; docs/twin.md has the command.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hseed
from hypothesis.stateful import run_state_machine_as_test

from kraft_jbod.realkafka.distribution import KafkaDistribution
from tests.twin.machine import KNOWN_KAFKA_FAULTS, TOTALS, TwinMachine
from tests.twin.pair import Pair

EXAMPLES = int(os.environ.get("KRAFT_JBOD_TWIN_EXAMPLES", "0"))
STEPS = int(os.environ.get("KRAFT_JBOD_TWIN_STEPS", "30"))
SEED = os.environ.get("KRAFT_JBOD_TWIN_SEED")
SHRINK = os.environ.get("KRAFT_JBOD_TWIN_SHRINK", "1") != "0"
# metadata.version -> sequences in CI: the default level gets most of the budget; 4.1-IV0 is
# the first with ELR finalized, 3.7-IV2 the first with directory assignment.
CI_LEVELS = {"4.3-IV0": 14, "4.1-IV0": 6, "3.7-IV2": 5}
LEVELS = [v for v in os.environ.get("KRAFT_JBOD_TWIN_LEVELS", "").split(",") if v] or list(CI_LEVELS)


@pytest.fixture(scope="module", params=LEVELS)
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
    level = pair.metadata_version
    examples = EXAMPLES or CI_LEVELS.get(level, 5)
    seed = int(SEED) if SEED is not None else zlib.crc32(level.encode())
    run = settings(
        max_examples=examples,
        stateful_step_count=STEPS,
        deadline=None,
        derandomize=False,
        database=None,  # a replayed example would not be the seed's: reproduction is by seed
        print_blob=True,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate] + ([Phase.shrink] if SHRINK else []),
    )

    class Run(TwinMachine):
        pass

    Run.pair = pair
    hseed(seed)(Run)
    before = dict(TOTALS)
    faults_before = len(KNOWN_KAFKA_FAULTS)
    try:
        run_state_machine_as_test(Run, settings=run)
    except BaseException as exc:
        exc.add_note(
            f"twin: metadata.version {level}, seed {seed}: replay with KRAFT_JBOD_TWIN_LEVELS={level} "
            f"KRAFT_JBOD_TWIN_SEED={seed} KRAFT_JBOD_TWIN_EXAMPLES={examples} KRAFT_JBOD_TWIN_STEPS={STEPS}"
        )
        raise
    finally:
        print(
            f"twin {level} seed {seed}: {TOTALS['sequences'] - before['sequences']} sequences, "
            f"{TOTALS['steps'] - before['steps']} steps (start and teardown included), "
            f"{pair.starts} controller pair start(s), "
            f"{len(KNOWN_KAFKA_FAULTS) - faults_before} sequence(s) ended by Kafka's known ELR-index fault"
        )
