"""One :class:`Route` per API the controller serves: everything the controller knows about it.

A route says which request class the key decodes to and who answers it (a handler of the
state machine, or ``None`` when the server shell or an extension does: ApiVersions, the
raft Fetch path, SASL, Metadata on the client listener), the versions served on each
listener, how the API is authorized, whether it jumps the queue, whether its topic count
is checked before decoding, how to answer it with an error, how to cut it into slices,
and the name logs use. Which kind of node serves an API in Kafka comes from the schema's
own ``listeners`` field (``ApiKey.listeners``); the test of this table checks that every
route agrees with it.

Every other table is derived from :data:`ROUTES`: the versions the state machine answers
(:func:`handled_versions`), the client listener's reads and writes
(:func:`client_versions`, :func:`is_client_write`), the authorization policy
(:func:`authorization`), the priority and topic-count keys of the service, the
ApiVersions range, log names and error responses (:func:`error_response`).

Adding an API: write its handler in a module under ``controller/apis/`` and add one
``Route`` here (see docs/architecture.md).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, Literal, TypeVar

from kraft_jbod.controller import replication
from kraft_jbod.controller.apis import (
    admin,
    brokers,
    controllers,
    describe,
    directories,
    producer_ids,
    raft_voters,
    topics,
)
from kraft_jbod.controller.context import Call, ControllerContext, Outcome, Sliced
from kraft_jbod.errors import ConfigError
from kraft_jbod.messages.add_raft_voter_request import AddRaftVoterRequest
from kraft_jbod.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from kraft_jbod.messages.alter_configs_request import AlterConfigsRequest
from kraft_jbod.messages.alter_configs_response import AlterConfigsResourceResponse as LegacyAlterResult
from kraft_jbod.messages.alter_configs_response import AlterConfigsResponse
from kraft_jbod.messages.alter_partition_reassignments_request import AlterPartitionReassignmentsRequest
from kraft_jbod.messages.alter_partition_request import AlterPartitionRequest
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.api_versions_request import ApiVersionsRequest
from kraft_jbod.messages.assign_replicas_to_dirs_request import AssignReplicasToDirsRequest
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.broker_registration_request import BrokerRegistrationRequest
from kraft_jbod.messages.broker_registration_response import BrokerRegistrationResponse
from kraft_jbod.messages.controller_registration_request import ControllerRegistrationRequest
from kraft_jbod.messages.create_acls_request import CreateAclsRequest
from kraft_jbod.messages.create_acls_response import AclCreationResult, CreateAclsResponse
from kraft_jbod.messages.create_partitions_request import CreatePartitionsRequest
from kraft_jbod.messages.create_partitions_response import CreatePartitionsResponse, CreatePartitionsTopicResult
from kraft_jbod.messages.create_topics_request import CreateTopicsRequest
from kraft_jbod.messages.create_topics_response import CreatableTopicResult, CreateTopicsResponse
from kraft_jbod.messages.delete_acls_request import DeleteAclsRequest
from kraft_jbod.messages.delete_acls_response import DeleteAclsFilterResult, DeleteAclsResponse
from kraft_jbod.messages.delete_topics_request import DeleteTopicsRequest
from kraft_jbod.messages.delete_topics_response import DeletableTopicResult, DeleteTopicsResponse
from kraft_jbod.messages.describe_acls_request import DescribeAclsRequest
from kraft_jbod.messages.describe_cluster_request import DescribeClusterRequest
from kraft_jbod.messages.describe_configs_request import DescribeConfigsRequest
from kraft_jbod.messages.describe_configs_response import DescribeConfigsResponse, DescribeConfigsResult
from kraft_jbod.messages.describe_quorum_request import DescribeQuorumRequest
from kraft_jbod.messages.elect_leaders_request import ElectLeadersRequest
from kraft_jbod.messages.envelope_request import EnvelopeRequest
from kraft_jbod.messages.fetch_request import FetchRequest
from kraft_jbod.messages.fetch_snapshot_request import FetchSnapshotRequest
from kraft_jbod.messages.incremental_alter_configs_request import IncrementalAlterConfigsRequest
from kraft_jbod.messages.incremental_alter_configs_response import (
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsResponse,
)
from kraft_jbod.messages.list_partition_reassignments_request import ListPartitionReassignmentsRequest
from kraft_jbod.messages.metadata_request import MetadataRequest
from kraft_jbod.messages.metadata_response import MetadataResponse, MetadataResponseTopic
from kraft_jbod.messages.remove_raft_voter_request import RemoveRaftVoterRequest
from kraft_jbod.messages.sasl_authenticate_request import SaslAuthenticateRequest
from kraft_jbod.messages.sasl_handshake_request import SaslHandshakeRequest
from kraft_jbod.messages.unregister_broker_request import UnregisterBrokerRequest
from kraft_jbod.messages.unregister_controller_request import UnregisterControllerRequest
from kraft_jbod.messages.update_features_request import UpdateFeaturesRequest
from kraft_jbod.messages.update_raft_voter_request import UpdateRaftVoterRequest
from kraft_jbod.security.sasl import SASL_API_VERSIONS
from kraft_jbod.wire.message import Message

Req = TypeVar("Req", bound=Message)
Handler = Callable[[ControllerContext, Call, Req], Outcome]
ErrorBuilder = Callable[[Req, int, str | None], Message]
Splitter = Callable[[Req, int], Sliced | None]


@dataclass(frozen=True, slots=True)
class Authorization:
    """How an API is authorized (Kafka's ControllerApis):

    * ``cluster``: ``what`` is the operation needed on the cluster resource;
    * ``topic``: ``what`` is the operation needed on the cluster, or on every topic named;
    * ``none``: answered before any principal exists; ``what`` says why.
    """

    kind: Literal["cluster", "topic", "none"]
    what: str


def cluster(operation: str) -> Authorization:
    return Authorization("cluster", operation)


def per_topic(operation: str) -> Authorization:
    return Authorization("topic", operation)


def unchecked(why: str) -> Authorization:
    return Authorization("none", why)


class Client(enum.Enum):
    """Whether the client listener serves an API, and how."""

    NO = "no"
    READ = "read"  # answered on the client listener itself, from the state (client_api.answer)
    WRITE = "write"  # through the controller's one writer, as if a broker had forwarded it


@dataclass(frozen=True, slots=True)
class Route(Generic[Req]):
    """Everything the controller knows about one API (see the module docstring)."""

    key: ApiKey
    request_type: type[Req]
    authorization: Authorization
    # The state machine's handler; None: the server shell or an extension answers.
    handler: Handler[Req] | None = None
    versions: tuple[int, int] | None = None  # None: the request class's VALID_VERSIONS
    controller_listener: bool = True  # served on the controller listener
    client: Client = Client.NO
    client_versions: tuple[int, int] | None = None  # None: the same as ``versions``
    # Served before other requests on an authenticated controller connection (Rule 1 of service.py).
    priority: bool = False
    # The body starts with the array of topics it acts on: counted before decoding (service.py Rule 2).
    counted_topics: bool = False
    # The answer carrying an error code where Kafka puts it, for a response without a
    # top-level error code (Kafka's getErrorResponse); None: the top-level error_code.
    error_builder: ErrorBuilder[Req] | None = None
    # Cuts a request whose work grows with its size into slices (None: never sliced).
    split: Splitter[Req] | None = None
    log_name: str | None = None  # None: the API's name as Kafka writes it (ApiKey.title)

    @property
    def valid_versions(self) -> tuple[int, int]:
        if self.versions is not None:
            return self.versions
        lo, hi = self.request_type.VALID_VERSIONS
        return int(lo), int(hi)

    @property
    def client_valid_versions(self) -> tuple[int, int]:
        return self.client_versions if self.client_versions is not None else self.valid_versions

    @property
    def name(self) -> str:
        return self.log_name if self.log_name is not None else self.key.title

    @property
    def listeners(self) -> frozenset[str]:
        """The kinds of node Kafka's schema says serve this API (``broker``, ``controller``)."""
        return self.key.listeners

    def error_response(self, body: Message, code: int, message: str | None = None) -> Message:
        """The response to ``body`` carrying ``code`` everywhere Kafka would put it.

        Raises:
            ConfigError: the response has no error code to carry it.
        """
        if self.error_builder is not None:
            assert isinstance(body, self.request_type)
            return self.error_builder(body, code, message)
        return top_level_error(self.key, code, message)


def top_level_error(key: int, code: int, message: str | None = None) -> Message:
    """A response of ``key`` with its top-level ``error_code`` (and message) set.

    Raises:
        ConfigError: the response has no top-level error code.
    """
    api = ApiKey.find(key)
    resp: Any = api.response_class() if api is not None else None
    if resp is None or not hasattr(resp, "error_code"):
        raise ConfigError(f"api key {key} responses have no error code to set")
    resp.error_code = code
    if message is not None and hasattr(resp, "error_message"):
        resp.error_message = message
    out: Message = resp
    return out


# ---------------------------------------------------------------------------- error answers


def _registration_error(body: BrokerRegistrationRequest, code: int, message: str | None) -> Message:
    return BrokerRegistrationResponse(error_code=code, broker_epoch=-1)


def _create_topics_error(body: CreateTopicsRequest, code: int, message: str | None) -> Message:
    return CreateTopicsResponse(
        topics=[CreatableTopicResult(name=t.name, error_code=code, error_message=message) for t in body.topics]
    )


def _delete_topics_error(body: DeleteTopicsRequest, code: int, message: str | None) -> Message:
    names = list(body.topic_names) + [t.name for t in body.topics]
    return DeleteTopicsResponse(
        responses=[DeletableTopicResult(name=n, error_code=code, error_message=message) for n in names]
    )


def _metadata_error(body: MetadataRequest, code: int, message: str | None) -> Message:
    topics = [MetadataResponseTopic(error_code=code, name=t.name, topic_id=t.topic_id) for t in (body.topics or ())]
    return MetadataResponse(topics=topics)


def _create_acls_error(body: CreateAclsRequest, code: int, message: str | None) -> Message:
    return CreateAclsResponse(results=[AclCreationResult(code, message) for _ in body.creations])


def _delete_acls_error(body: DeleteAclsRequest, code: int, message: str | None) -> Message:
    return DeleteAclsResponse(filter_results=[DeleteAclsFilterResult(code, message) for _ in body.filters])


def _describe_configs_error(body: DescribeConfigsRequest, code: int, message: str | None) -> Message:
    return DescribeConfigsResponse(
        results=[DescribeConfigsResult(code, message, r.resource_type, r.resource_name) for r in body.resources]
    )


def _alter_configs_error(body: AlterConfigsRequest, code: int, message: str | None) -> Message:
    return AlterConfigsResponse(
        responses=[LegacyAlterResult(code, message, r.resource_type, r.resource_name) for r in body.resources]
    )


def _incremental_alter_configs_error(body: IncrementalAlterConfigsRequest, code: int, message: str | None) -> Message:
    return IncrementalAlterConfigsResponse(
        responses=[
            AlterConfigsResourceResponse(code, message, r.resource_type, r.resource_name) for r in body.resources
        ]
    )


def _create_partitions_error(body: CreatePartitionsRequest, code: int, message: str | None) -> Message:
    return CreatePartitionsResponse(results=[CreatePartitionsTopicResult(t.name, code, message) for t in body.topics])


# ---------------------------------------------------------------------------- the table

_BROKER_ACTION: Final = cluster("CLUSTER_ACTION")
_HANDSHAKE: Final = unchecked("authentication itself, before a principal exists")

# Left to inference (no Route[Any] annotation): each Route keeps its own request type, so
# mypy checks its handler, error builder and splitter against that request class.
_ALL: Final = (
    # The handshake: answered by the server shell and the SASL extension, on every listener.
    Route(
        ApiKey.API_VERSIONS,
        ApiVersionsRequest,
        unchecked("a client needs it to speak at all, before authenticating"),
        versions=(0, 5),
        client=Client.READ,
    ),
    Route(
        ApiKey.SASL_HANDSHAKE,
        SaslHandshakeRequest,
        _HANDSHAKE,
        versions=SASL_API_VERSIONS[ApiKey.SASL_HANDSHAKE],
        client=Client.READ,
    ),
    Route(
        ApiKey.SASL_AUTHENTICATE,
        SaslAuthenticateRequest,
        _HANDSHAKE,
        versions=SASL_API_VERSIONS[ApiKey.SASL_AUTHENTICATE],
        client=Client.READ,
    ),
    # Raft replication: observers fetch the log as a KRaft broker does (controller/replication.py).
    Route(ApiKey.FETCH, FetchRequest, _BROKER_ACTION, versions=replication.FETCH_VERSIONS),
    Route(ApiKey.FETCH_SNAPSHOT, FetchSnapshotRequest, _BROKER_ACTION, versions=replication.FETCH_SNAPSHOT_VERSIONS),
    # A broker's life: apis/brokers.py, apis/directories.py, apis/topics.py, apis/producer_ids.py.
    Route(
        ApiKey.BROKER_REGISTRATION,
        BrokerRegistrationRequest,
        _BROKER_ACTION,
        brokers.handle_registration,
        priority=True,
        error_builder=_registration_error,
    ),
    Route(ApiKey.BROKER_HEARTBEAT, BrokerHeartbeatRequest, _BROKER_ACTION, brokers.handle_heartbeat, priority=True),
    Route(ApiKey.UNREGISTER_BROKER, UnregisterBrokerRequest, cluster("ALTER"), brokers.handle_unregister),
    Route(
        ApiKey.CONTROLLER_REGISTRATION,
        ControllerRegistrationRequest,
        _BROKER_ACTION,
        controllers.handle_controller_registration,
    ),
    Route(
        ApiKey.UNREGISTER_CONTROLLER,
        UnregisterControllerRequest,
        cluster("ALTER"),
        controllers.handle_unregister_controller,
    ),
    Route(
        ApiKey.ASSIGN_REPLICAS_TO_DIRS,
        AssignReplicasToDirsRequest,
        _BROKER_ACTION,
        directories.handle_assign,
        split=directories.split_assign,
    ),
    Route(
        ApiKey.ALTER_PARTITION,
        AlterPartitionRequest,
        _BROKER_ACTION,
        topics.handle_alter_partition,
        split=topics.split_alter_partition,
    ),
    Route(ApiKey.ALLOCATE_PRODUCER_IDS, AllocateProducerIdsRequest, _BROKER_ACTION, producer_ids.handle_allocate),
    # DescribeCluster: ALTER on the controller listener, unlike on a broker.
    Route(
        ApiKey.DESCRIBE_CLUSTER,
        DescribeClusterRequest,
        cluster("ALTER"),
        describe.handle_describe_cluster,
        client=Client.READ,
        client_versions=(0, 1),
    ),
    # Metadata: the client listener only, answered there (controller/client_api.py).
    Route(
        ApiKey.METADATA,
        MetadataRequest,
        per_topic("DESCRIBE"),
        versions=(0, 12),
        controller_listener=False,
        client=Client.READ,
        error_builder=_metadata_error,
    ),
    # Topics: CreateTopics/DeleteTopics are authorized topic by topic. The client listener
    # serves 4.4's lowest versions where KIP-896 removed old ones.
    Route(
        ApiKey.CREATE_TOPICS,
        CreateTopicsRequest,
        per_topic("CREATE"),
        topics.handle_create_topics,
        client=Client.WRITE,
        client_versions=(2, 7),
        counted_topics=True,
        error_builder=_create_topics_error,
    ),
    Route(
        ApiKey.DELETE_TOPICS,
        DeleteTopicsRequest,
        per_topic("DELETE"),
        topics.handle_delete_topics,
        client=Client.WRITE,
        client_versions=(1, 6),
        counted_topics=True,
        error_builder=_delete_topics_error,
    ),
    # Admin APIs a broker forwards (Envelope) or KIP-919 clients send: apis/admin.py. Kafka
    # checks the topic-scoped ones per topic; here the cluster grant is required for all.
    # Versions: Kafka 4.4's where KIP-896 dropped old ones (DescribeConfigs, the ACL APIs).
    Route(ApiKey.ENVELOPE, EnvelopeRequest, _BROKER_ACTION, admin.handle_envelope, versions=(0, 0)),
    Route(
        ApiKey.CREATE_PARTITIONS,
        CreatePartitionsRequest,
        cluster("ALTER"),
        admin.handle_create_partitions,
        versions=(0, 3),
        client=Client.WRITE,
        counted_topics=True,
        error_builder=_create_partitions_error,
    ),
    Route(
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        IncrementalAlterConfigsRequest,
        cluster("ALTER_CONFIGS"),
        admin.handle_incremental_alter_configs,
        versions=(0, 1),
        client=Client.WRITE,
        error_builder=_incremental_alter_configs_error,
    ),
    Route(
        ApiKey.ALTER_CONFIGS,
        AlterConfigsRequest,
        cluster("ALTER_CONFIGS"),
        admin.handle_alter_configs,
        versions=(0, 2),
        client=Client.WRITE,
        error_builder=_alter_configs_error,
    ),
    Route(
        ApiKey.DESCRIBE_CONFIGS,
        DescribeConfigsRequest,
        cluster("DESCRIBE_CONFIGS"),
        admin.handle_describe_configs,
        versions=(1, 4),
        client=Client.READ,
        error_builder=_describe_configs_error,
    ),
    Route(
        ApiKey.ELECT_LEADERS,
        ElectLeadersRequest,
        cluster("ALTER"),
        admin.handle_elect_leaders,
        versions=(0, 2),
        client=Client.WRITE,
    ),
    Route(
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        AlterPartitionReassignmentsRequest,
        cluster("ALTER"),
        admin.handle_alter_reassignments,
        versions=(0, 1),
        client=Client.WRITE,
    ),
    Route(
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
        ListPartitionReassignmentsRequest,
        cluster("DESCRIBE"),
        admin.handle_list_reassignments,
        versions=(0, 0),
        client=Client.READ,
    ),
    Route(
        ApiKey.CREATE_ACLS,
        CreateAclsRequest,
        cluster("ALTER"),
        admin.handle_create_acls,
        versions=(1, 3),
        client=Client.WRITE,
        error_builder=_create_acls_error,
    ),
    Route(
        ApiKey.DELETE_ACLS,
        DeleteAclsRequest,
        cluster("ALTER"),
        admin.handle_delete_acls,
        versions=(1, 3),
        client=Client.WRITE,
        error_builder=_delete_acls_error,
    ),
    Route(
        ApiKey.DESCRIBE_ACLS,
        DescribeAclsRequest,
        cluster("DESCRIBE"),
        admin.handle_describe_acls,
        versions=(1, 3),
        client=Client.READ,
    ),
    Route(
        ApiKey.UPDATE_FEATURES,
        UpdateFeaturesRequest,
        cluster("ALTER"),
        admin.handle_update_features,
        versions=(0, 2),
        client=Client.WRITE,
    ),
    Route(
        ApiKey.DESCRIBE_QUORUM,
        DescribeQuorumRequest,
        cluster("DESCRIBE"),
        admin.handle_describe_quorum,
        versions=(0, 2),
    ),
    # KIP-853 voter changes, answered with Kafka's errors (the voter set never changes here).
    # ControllerApis asks ALTER for Add/Remove (an operator's act) and CLUSTER_ACTION for
    # Update (a voter announcing its own endpoints).
    Route(ApiKey.ADD_RAFT_VOTER, AddRaftVoterRequest, cluster("ALTER"), raft_voters.handle_add_voter),
    Route(ApiKey.REMOVE_RAFT_VOTER, RemoveRaftVoterRequest, cluster("ALTER"), raft_voters.handle_remove_voter),
    Route(ApiKey.UPDATE_RAFT_VOTER, UpdateRaftVoterRequest, _BROKER_ACTION, raft_voters.handle_update_voter),
)

ROUTES: Final[Mapping[int, Route[Any]]] = {route.key: route for route in _ALL}

# ---------------------------------------------------------------------------- derived tables

API_VERSIONS_RANGE: Final = ROUTES[ApiKey.API_VERSIONS].valid_versions
PRIORITY_KEYS: Final = frozenset(key for key, route in ROUTES.items() if route.priority)
COUNTED_TOPIC_KEYS: Final = frozenset(key for key, route in ROUTES.items() if route.counted_topics)


def handled_versions() -> dict[int, tuple[int, int]]:
    """Api key -> versions, for every API the state machine handles."""
    return {key: route.valid_versions for key, route in ROUTES.items() if route.handler is not None}


def client_versions() -> dict[int, tuple[int, int]]:
    """Api key -> versions the client listener lists besides the handshake (ApiVersions, SASL)."""
    return {
        key: route.client_valid_versions
        for key, route in ROUTES.items()
        if route.client is not Client.NO and route.authorization.kind != "none"
    }


def is_client_write(api_key: int) -> bool:
    """True for the admin writes the client listener hands to the controller's one writer."""
    route = ROUTES.get(api_key)
    return route is not None and route.client is Client.WRITE


def authorization(api_key: int) -> Authorization | None:
    """How ``api_key`` is authorized, or None when no route names it (then it is refused)."""
    route = ROUTES.get(api_key)
    return None if route is None else route.authorization


def log_name(api_key: int) -> str | None:
    route = ROUTES.get(api_key)
    return None if route is None else route.name


def error_response(api_key: int, body: Message, code: int, message: str | None = None) -> Message:
    """A response to ``body`` that carries ``code`` everywhere Kafka would put it.

    Raises:
        ConfigError: the api has no error code to carry it.
    """
    route = ROUTES.get(api_key)
    if route is not None and isinstance(body, route.request_type):
        return route.error_response(body, code, message)
    return top_level_error(api_key, code, message)
