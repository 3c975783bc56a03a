"""AssignReplicasToDirs (73): a broker says which of its directories holds each replica.

Per partition: UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION, or NOT_LEADER_OR_FOLLOWER
when the broker holds no replica of it; otherwise the Directories entry changes when it
differs, through the change builder with its election, and a replica assigned to a directory
that is offline leaves the ISR and leadership afterwards, both as Kafka's
ReplicationControlManager.handleAssignReplicasToDirs does (``Draft.assign_dir``).
"""

from __future__ import annotations

from kraft_jbod.controller import features as fv
from kraft_jbod.controller.context import Call, ControllerContext, Outcome
from kraft_jbod.controller.draft import Draft
from kraft_jbod.messages.assign_replicas_to_dirs_request import AssignReplicasToDirsRequest
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


def handle_assign(ctx: ControllerContext, call: Call, req: AssignReplicasToDirsRequest) -> Outcome:
    img = ctx.image
    if not fv.supports_jbod(img.metadata_version):
        return Outcome(AssignReplicasToDirsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION), [])
    reg = img.brokers.get(req.broker_id)
    if reg is None or reg.epoch != req.broker_epoch:
        return Outcome(AssignReplicasToDirsResponse(error_code=ErrorCode.STALE_BROKER_EPOCH), [])
    b = reg.broker_id
    d = Draft(ctx)
    results: list[AssignDirResult] = []
    for dd in req.directories:
        directory = img.canonical(dd.id)
        offline = not d.dir_online(b, directory)
        topics_out: list[AssignTopicResult] = []
        for td in dd.topics:
            topic = img.topics.get(td.topic_id)
            parts_out: list[AssignPartResult] = []
            for pd in td.partitions:
                code = ErrorCode.NONE
                p = None if topic is None else topic.partitions.get(pd.partition_index)
                if topic is None:
                    code = ErrorCode.UNKNOWN_TOPIC_ID
                elif p is None:
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif b not in p.replicas:
                    code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                else:
                    d.assign_dir(p, b, directory, offline)
                parts_out.append(AssignPartResult(partition_index=pd.partition_index, error_code=code))
            topics_out.append(AssignTopicResult(topic_id=td.topic_id, partitions=parts_out))
        results.append(AssignDirResult(id=dd.id, topics=topics_out))
    return Outcome(AssignReplicasToDirsResponse(error_code=ErrorCode.NONE, directories=results), d.records)
