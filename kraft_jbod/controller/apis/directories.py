"""AssignReplicasToDirs (73): a broker says which of its directories holds each replica.

Per partition: UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION, or NOT_LEADER_OR_FOLLOWER
when the broker holds no replica of it; otherwise the Directories entry changes when it
differs, through the change builder with its election, and a replica assigned to a directory
that is offline leaves the ISR and leadership afterwards, both as Kafka's
ReplicationControlManager.handleAssignReplicasToDirs does (``Draft.assign_dir``).

A request naming more than ``MAX_PARTITIONS_PER_SLICE`` partitions is cut into slices
(:func:`split_assign`): the server handles and commits one slice at a time and lets other
requests (heartbeats) run in between, so a broker assigning 10^6 replicas at once does not
hold every other broker's session for seconds. Kafka computes the whole request in one
controller event, but commits its records non-atomically too (``ControllerResult.of``),
so a reader could already see part of them. Each slice sees the slices before it applied;
assigning a replica is idempotent, so the result equals one pass. Should a later slice
meet a top-level error (the broker re-registered in between), the answer is that error
and the broker retries the whole request, as it would after any error.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from kraft_jbod.controller import features as fv
from kraft_jbod.controller.context import Call, ControllerContext, Outcome, Sliced
from kraft_jbod.controller.draft import Draft
from kraft_jbod.controller.image import Partition
from kraft_jbod.messages.assign_replicas_to_dirs_request import AssignReplicasToDirsRequest
from kraft_jbod.messages.assign_replicas_to_dirs_request import DirectoryData as AssignDir
from kraft_jbod.messages.assign_replicas_to_dirs_response import (
    AssignReplicasToDirsResponse,
)
from kraft_jbod.messages.assign_replicas_to_dirs_response import (
    DirectoryData as AssignDirResult,
)
from kraft_jbod.messages.assign_replicas_to_dirs_response import (
    PartitionData as AssignPartResult,
)
from kraft_jbod.messages.assign_replicas_to_dirs_response import (
    TopicData as AssignTopicResult,
)
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.wire.message import Message


def handle_assign(ctx: ControllerContext, call: Call, req: AssignReplicasToDirsRequest) -> Outcome:
    img = ctx.image
    if not fv.supports_jbod(img.metadata_version):
        return Outcome(AssignReplicasToDirsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION), [])
    reg = img.brokers.get(req.broker_id)
    if reg is None or reg.epoch != req.broker_epoch:
        return Outcome(AssignReplicasToDirsResponse(error_code=ErrorCode.STALE_BROKER_EPOCH), [])
    b = reg.broker_id
    d = Draft(ctx)
    ok, unknown_partition, not_a_replica = (
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
    )
    results: list[AssignDirResult] = []
    for dd in req.directories:
        directory = img.canonical(dd.id)
        offline = not d.dir_online(b, directory)
        topics_out: list[AssignTopicResult] = []
        for td in dd.topics:
            topic = img.topics.get(td.topic_id)
            parts_out: list[AssignPartResult] = []
            if topic is None:
                for pd in td.partitions:
                    parts_out.append(AssignPartResult(pd.partition_index, ErrorCode.UNKNOWN_TOPIC_ID))
            else:
                # Thousands of partitions per request: the loop reads locals only.
                known = topic.partitions
                held: list[Partition] = []
                for pd in td.partitions:
                    index = pd.partition_index
                    p = known.get(index)
                    if p is None:
                        parts_out.append(AssignPartResult(index, unknown_partition))
                    elif b not in p.replicas:
                        parts_out.append(AssignPartResult(index, not_a_replica))
                    else:
                        held.append(p)
                        parts_out.append(AssignPartResult(index, ok))
                d.assign_dirs(held, b, directory, offline)
            topics_out.append(AssignTopicResult(topic_id=td.topic_id, partitions=parts_out))
        results.append(AssignDirResult(id=dd.id, topics=topics_out))
    return Outcome(AssignReplicasToDirsResponse(error_code=ErrorCode.NONE, directories=results), d.records)


def split_assign(req: AssignReplicasToDirsRequest, limit: int) -> Sliced | None:
    """Cut ``req`` into requests of at most ``limit`` partitions each, in request order
    (None when it names no more than that). The slices are built one at a time, as the
    server asks for them, so cutting costs each turn O(limit), not O(request). A directory
    or topic split across two slices is one entry again in the merged answer; an entry
    without partitions (or topics) goes with the partitions before it, so its empty result
    keeps its place."""
    if sum(len(t.partitions) for d in req.directories for t in d.topics) <= limit:
        return None
    # Per slice: does its first directory (and topic) continue the previous slice's last one?
    continues: list[tuple[bool, bool]] = []

    def bodies() -> Iterator[Message]:
        cur: list[AssignDir] = []
        at: tuple[int, int | None] | None = None  # (directory, topic) of the last entry of cur
        first: tuple[int, int | None] | None = None  # ... of its first entry
        before: tuple[int, int | None] | None = None  # ... of the previous slice's last entry
        count = 0

        def place(di: int, ti: int | None) -> None:
            nonlocal at, first
            if at is None or at[0] != di:
                cur.append(dataclasses.replace(req.directories[di], topics=[]))
                at = (di, None)
            if ti is not None and at[1] != ti:
                cur[-1].topics.append(dataclasses.replace(req.directories[di].topics[ti], partitions=[]))
                at = (di, ti)
            if first is None:
                first = (di, ti)

        def flush() -> Message:
            nonlocal cur, at, first, before, count
            assert first is not None
            same_dir = before is not None and before[0] == first[0]
            continues.append((same_dir, same_dir and first[1] is not None and before == first))
            before, body = at, dataclasses.replace(req, directories=cur)
            cur, at, first, count = [], None, None, 0
            return body

        for di, dd in enumerate(req.directories):
            if not dd.topics:
                place(di, None)
            for ti, td in enumerate(dd.topics):
                if not td.partitions:
                    place(di, ti)
                i = 0
                while i < len(td.partitions):
                    if count == limit:
                        yield flush()
                    take = td.partitions[i : i + limit - count]
                    place(di, ti)
                    cur[-1].topics[-1].partitions.extend(take)
                    count += len(take)
                    i += len(take)
        if cur:
            yield flush()

    return Sliced(bodies(), lambda responses: _merge_assign(responses, continues))


def _merge_assign(responses: list[Any], continues: list[tuple[bool, bool]]) -> AssignReplicasToDirsResponse:
    for resp in responses:
        if resp.error_code != ErrorCode.NONE:
            return AssignReplicasToDirsResponse(error_code=resp.error_code)
    out: list[AssignDirResult] = []
    for resp, (same_dir, same_topic) in zip(responses, continues, strict=False):
        for j, d in enumerate(resp.directories):
            if j == 0 and same_dir and out:
                last = out[-1]
                for i, t in enumerate(d.topics):
                    if i == 0 and same_topic and last.topics:
                        last.topics[-1].partitions.extend(t.partitions)
                    else:
                        last.topics.append(t)
            else:
                out.append(d)
    return AssignReplicasToDirsResponse(error_code=ErrorCode.NONE, directories=out)
