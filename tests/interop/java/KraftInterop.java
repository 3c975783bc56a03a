/*
 * The interop harness: Apache Kafka 4.4's own broker-side classes driven against kraft-jbod.
 *
 * Written for kraft-jbod; it only calls Kafka's public classes (built from source into the
 * oracle jar by ../shared/kafka/build.sh) and copies none of their code.
 *
 * Protocol: one JSON object per line on stdin, exactly one JSON object per line on stdout
 * (System.out is pointed at stderr so nothing else lands there). Every failure becomes
 * {"ok":false,"error":"Class: message"}; the JVM never exits on a bad command. "id" is echoed.
 *
 * Ops:
 *   start_broker  a "Kafka broker control plane": KafkaRaftClient as an observer of the
 *                 controller over a real NetworkClient, feeding a MetadataLoader, plus a
 *                 BrokerLifecycleManager over NodeToControllerChannelManagerImpl (wrapped so
 *                 every request/answer is recorded) and an AssignmentsManager over a second
 *                 channel. The lifecycle manager's metadata offset is the loader's, so catching
 *                 up is real. See BrokerHandle.
 *   broker        state of one broker: lifecycle state, epoch, futures, loader offset, raft HWM
 *   unfence / fail_dir / cordon / shutdown / assign / stop_broker
 *   image         the broker's MetadataImage as JSON (ImageJson)
 *   exchanges     the recorded requests and answers (generated JsonConverters)
 *   faults        what the loader's fault handler saw
 *   load_log      MetadataBatchLoader over a metadata log directory's segment files -> image JSON
 *   quit
 */

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.BufferedReader;
import java.io.File;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.io.Writer;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import org.apache.kafka.clients.ApiVersions;
import org.apache.kafka.clients.ClientResponse;
import org.apache.kafka.clients.ManualMetadataUpdater;
import org.apache.kafka.clients.MetadataRecoveryStrategy;
import org.apache.kafka.clients.NetworkClient;
import org.apache.kafka.clients.BootstrapConfiguration;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.network.ChannelBuilder;
import org.apache.kafka.common.network.ChannelBuilders;
import org.apache.kafka.common.network.ListenerName;
import org.apache.kafka.common.network.NetworkReceive;
import org.apache.kafka.common.network.Selectable;
import org.apache.kafka.common.network.Selector;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.message.BrokerRegistrationRequestData;
import org.apache.kafka.common.requests.AbstractRequest;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.security.JaasContext;
import org.apache.kafka.common.security.auth.SecurityProtocol;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.common.utils.internals.BufferSupplier;
import org.apache.kafka.common.utils.internals.LogContext;
import org.apache.kafka.image.MetadataImage;
import org.apache.kafka.image.MetadataDelta;
import org.apache.kafka.image.TopicImage;
import org.apache.kafka.image.loader.LoaderManifest;
import org.apache.kafka.image.writer.ImageWriterOptions;
import org.apache.kafka.image.writer.RecordListWriter;
import org.apache.kafka.image.loader.MetadataBatchLoader;
import org.apache.kafka.image.loader.MetadataLoader;
import org.apache.kafka.image.publisher.MetadataPublisher;
import org.apache.kafka.metadata.BrokerRegistration;
import org.apache.kafka.metadata.KRaftMetadataCache;
import org.apache.kafka.metadata.MetadataRecordSerde;
import org.apache.kafka.common.message.MetadataResponseData;
import org.apache.kafka.common.message.MetadataResponseDataJsonConverter;
import org.apache.kafka.metadata.PartitionRegistration;
import org.apache.kafka.metadata.SupportedConfigChecker;
import org.apache.kafka.raft.Batch;
import org.apache.kafka.raft.Endpoints;
import org.apache.kafka.raft.FileQuorumStateStore;
import org.apache.kafka.raft.KafkaNetworkChannel;
import org.apache.kafka.raft.KafkaRaftClient;
import org.apache.kafka.raft.KafkaRaftClientDriver;
import org.apache.kafka.raft.LeaderAndEpoch;
import org.apache.kafka.raft.MetadataLogConfig;
import org.apache.kafka.raft.QuorumConfig;
import org.apache.kafka.raft.TimingWheelExpirationService;
import org.apache.kafka.raft.internals.KafkaRaftLog;
import org.apache.kafka.raft.internals.RecordsIterator;
import org.apache.kafka.server.AssignmentsManager;
import org.apache.kafka.server.BrokerFeatures;
import org.apache.kafka.server.BrokerLifecycleManager;
import org.apache.kafka.server.ControllerInformation;
import org.apache.kafka.server.NodeToControllerChannelManagerImpl;
import org.apache.kafka.server.common.ApiMessageAndVersion;
import org.apache.kafka.server.common.ControllerRequestCompletionHandler;
import org.apache.kafka.server.common.KRaftVersion;
import org.apache.kafka.server.common.NodeToControllerChannelManager;
import org.apache.kafka.server.common.TopicIdPartition;
import org.apache.kafka.server.config.AbstractKafkaConfig;
import org.apache.kafka.server.fault.FaultHandler;
import org.apache.kafka.server.fault.FaultHandlerException;
import org.apache.kafka.server.util.KafkaScheduler;
import org.apache.kafka.server.util.timer.SystemTimer;

public final class KraftInterop {
    static final ObjectMapper MAPPER = new ObjectMapper();
    static final JsonNodeFactory NODES = JsonNodeFactory.instance;
    static final Map<Integer, BrokerHandle> BROKERS = new ConcurrentHashMap<>();

    public static void main(String[] args) throws Exception {
        PrintStream realOut = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        Writer out = new OutputStreamWriter(realOut, StandardCharsets.UTF_8);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            ObjectNode reply;
            JsonNode id = null;
            boolean quit = false;
            try {
                JsonNode req = MAPPER.readTree(line);
                id = req.get("id");
                String op = req.path("op").asText();
                quit = op.equals("quit");
                reply = quit ? ok() : dispatch(op, req);
            } catch (Throwable t) {
                reply = NODES.objectNode();
                reply.put("ok", false);
                Throwable root = t;
                while (root.getCause() != null && (root instanceof java.util.concurrent.ExecutionException
                        || root instanceof java.util.concurrent.CompletionException)) {
                    root = root.getCause();
                }
                reply.put("error", root.getClass().getName() + ": " + root.getMessage());
            }
            if (id != null) reply.set("id", id);
            out.write(MAPPER.writeValueAsString(reply));
            out.write('\n');
            out.flush();
            if (quit) break;
        }
        for (BrokerHandle b : BROKERS.values()) {
            try {
                b.stop();
            } catch (Throwable ignored) {
                // best effort at exit
            }
        }
        System.exit(0);
    }

    static ObjectNode ok() {
        ObjectNode o = NODES.objectNode();
        o.put("ok", true);
        return o;
    }

    static BrokerHandle broker(JsonNode req) {
        BrokerHandle b = BROKERS.get(req.path("broker").asInt());
        if (b == null) throw new IllegalArgumentException("no broker " + req.path("broker").asInt());
        return b;
    }

    static ObjectNode dispatch(String op, JsonNode req) throws Exception {
        switch (op) {
            case "start_broker": {
                BrokerHandle b = new BrokerHandle(req);
                BrokerHandle old = BROKERS.putIfAbsent(b.nodeId, b);
                if (old != null) throw new IllegalStateException("broker " + b.nodeId + " is running");
                try {
                    b.start();
                } catch (Throwable t) {
                    BROKERS.remove(b.nodeId);
                    throw t;
                }
                return b.describe();
            }
            case "broker":
                return broker(req).describe();
            case "wait": {
                BrokerHandle b = broker(req);
                String until = req.path("until").asText();
                long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(req.path("timeout_ms").asLong(15000));
                while (true) {
                    ObjectNode d = b.describe();
                    if (b.reached(until, req)) return d;
                    if (System.nanoTime() > deadline) {
                        d.put("ok", false);
                        d.put("error", "timed out waiting for " + until);
                        return d;
                    }
                    Thread.sleep(20);
                }
            }
            case "unfence":
                broker(req).lifecycle.setReadyToUnfence().get(req.path("timeout_ms").asLong(15000), TimeUnit.MILLISECONDS);
                return broker(req).describe();
            case "fail_dir":
                broker(req).lifecycle.propagateDirectoryFailure(Uuid.fromString(req.path("dir").asText()),
                        req.path("timeout_ms").asLong(30000));
                return ok();
            case "cordon": {
                Set<Uuid> dirs = new java.util.HashSet<>();
                for (JsonNode d : req.path("dirs")) dirs.add(Uuid.fromString(d.asText()));
                BrokerHandle b = broker(req);
                ObjectNode o = ok();
                o.put("supported", b.cordonSupported());
                b.lifecycle.propagateDirectoryCordoned(dirs);
                return o;
            }
            case "shutdown": {
                BrokerHandle b = broker(req);
                b.lifecycle.beginControlledShutdown();
                ObjectNode o = b.describe();
                try {
                    b.lifecycle.controlledShutdownFuture().get(req.path("timeout_ms").asLong(15000), TimeUnit.MILLISECONDS);
                    o = b.describe();
                    o.put("controlled_shutdown_done", true);
                } catch (java.util.concurrent.TimeoutException e) {
                    o = b.describe();
                    o.put("controlled_shutdown_done", false);
                }
                return o;
            }
            case "assign":
                return broker(req).assign(req);
            case "stop_broker": {
                BrokerHandle b = BROKERS.remove(req.path("broker").asInt());
                if (b == null) throw new IllegalArgumentException("no broker " + req.path("broker").asInt());
                ObjectNode o = b.describe();
                b.stop();
                return o;
            }
            case "stop_all": {
                ObjectNode o = ok();
                ArrayNode stopped = o.putArray("stopped");
                for (Integer id : new ArrayList<>(BROKERS.keySet())) {
                    BrokerHandle b = BROKERS.remove(id);
                    if (b != null) {
                        b.stop();
                        stopped.add(id);
                    }
                }
                return o;
            }
            case "image": {
                BrokerHandle b = broker(req);
                ObjectNode o = ok();
                MetadataImage img = b.image.get();
                o.set("image", img == null ? NODES.nullNode() : ImageJson.of(img));
                if (img != null && req.has("listener")) o.set("metadata", ImageJson.metadata(img, req.path("listener").asText()));
                return o;
            }
            case "exchanges": {
                ObjectNode o = ok();
                ArrayNode a = o.putArray("exchanges");
                broker(req).exchanges.forEach(a::add);
                return o;
            }
            case "faults": {
                ObjectNode o = ok();
                ArrayNode a = o.putArray("faults");
                broker(req).faults.forEach(a::add);
                return o;
            }
            case "load_log": {
                ObjectNode o = LogLoader.load(Path.of(req.path("dir").asText()));
                if (req.has("listener")) o.set("metadata", ImageJson.metadata(LogLoader.lastImage, req.path("listener").asText()));
                LogLoader.lastImage = null;
                return o;
            }
            case "describe_quorum": {
                // Kafka 4.4's Admin client as kafka-metadata-quorum --bootstrap-controller runs it.
                Properties ap = new Properties();
                ap.put("bootstrap.controllers", req.path("bootstrap_controllers").asText());
                ap.put("enable.metrics.push", "false");
                try (org.apache.kafka.clients.admin.Admin admin = org.apache.kafka.clients.admin.Admin.create(ap)) {
                    org.apache.kafka.clients.admin.QuorumInfo info =
                        admin.describeMetadataQuorum().quorumInfo().get(15, TimeUnit.SECONDS);
                    ObjectNode o = ok();
                    o.put("leader", info.leaderId());
                    o.put("epoch", info.leaderEpoch());
                    ArrayNode vs = o.putArray("voters");
                    for (org.apache.kafka.clients.admin.QuorumInfo.ReplicaState r : info.voters()) {
                        ObjectNode v = vs.addObject();
                        v.put("id", r.replicaId());
                        v.put("directory", r.replicaDirectoryId().toString());
                    }
                    ObjectNode nodes = o.putObject("nodes");
                    info.nodes().forEach((id, n) -> {
                        ArrayNode eps = nodes.putArray(String.valueOf(id));
                        n.endpoints().forEach(e -> eps.add(e.name() + "://" + e.host() + ":" + e.port()));
                    });
                    return o;
                }
            }
            case "quorum_state":
                return QuorumProbe.read(new File(req.path("dir").asText()), req.path("node").asInt());
            default:
                throw new IllegalArgumentException("unknown op " + op);
        }
    }

    /** A generated message as its JsonConverter prints it (reflection: <Name>DataJsonConverter). */
    static JsonNode messageJson(ApiMessage data, short version) {
        try {
            Class<?> conv = Class.forName(data.getClass().getName() + "JsonConverter");
            return (JsonNode) conv.getMethod("write", data.getClass(), short.class).invoke(null, data, version);
        } catch (ReflectiveOperationException e) {
            return NODES.textNode("<" + e + ">");
        }
    }

    /** Records every request sent through Kafka's real channel manager and what came back. */
    static final class RecordingChannel implements NodeToControllerChannelManager {
        final NodeToControllerChannelManager inner;
        final List<JsonNode> log;
        final String channel;

        RecordingChannel(NodeToControllerChannelManager inner, List<JsonNode> log, String channel) {
            this.inner = inner;
            this.log = log;
            this.channel = channel;
        }

        @Override public void start() { inner.start(); }
        @Override public void shutdown() throws InterruptedException { inner.shutdown(); }
        @Override public Optional<org.apache.kafka.clients.NodeApiVersions> controllerApiVersions() {
            return inner.controllerApiVersions();
        }
        @Override public long getTimeoutMs() { return inner.getTimeoutMs(); }

        @Override
        public void sendRequest(AbstractRequest.Builder<? extends AbstractRequest> builder,
                                ControllerRequestCompletionHandler handler) {
            inner.sendRequest(builder, new ControllerRequestCompletionHandler() {
                @Override
                public void onTimeout() {
                    ObjectNode e = NODES.objectNode();
                    e.put("channel", channel);
                    e.put("api", builder.apiKey().name);
                    e.put("timeout", true);
                    log.add(e);
                    handler.onTimeout();
                }

                @Override
                public void onComplete(ClientResponse response) {
                    ObjectNode e = NODES.objectNode();
                    e.put("channel", channel);
                    e.put("api", builder.apiKey().name);
                    e.put("api_key", builder.apiKey().id);
                    try {
                        short version = response.requestHeader().apiVersion();
                        e.put("version", version);
                        e.set("request", messageJson(builder.build(version).data(), version));
                        if (response.responseBody() != null) {
                            e.set("response", messageJson(response.responseBody().data(), version));
                        }
                        e.put("disconnected", response.wasDisconnected());
                        if (response.versionMismatch() != null) e.put("version_mismatch", response.versionMismatch().toString());
                    } catch (Throwable t) {
                        e.put("record_error", t.toString());
                    }
                    log.add(e);
                    handler.onComplete(response);
                }
            });
        }
    }

    /** One Kafka 4.4 broker's control plane, minus the data plane. */
    static final class BrokerHandle {
        final int nodeId;
        final JsonNode req;
        final List<JsonNode> exchanges = new CopyOnWriteArrayList<>();
        final List<JsonNode> faults = new CopyOnWriteArrayList<>();
        final AtomicReference<MetadataImage> image = new AtomicReference<>();
        final Map<String, Uuid> logDirs = new LinkedHashMap<>();
        final Time time = Time.SYSTEM;
        AbstractKafkaConfig config;
        Map<Integer, InetSocketAddress> voters;
        KafkaRaftClient<ApiMessageAndVersion> raft;
        KafkaNetworkChannel netChannel;
        KafkaRaftClientDriver<ApiMessageAndVersion> driver;
        KafkaRaftLog raftLog;
        KafkaScheduler scheduler;
        TimingWheelExpirationService expiration;
        MetadataLoader loader;
        BrokerLifecycleManager lifecycle;
        AssignmentsManager assignments;
        Metrics metrics = new Metrics();

        BrokerHandle(JsonNode req) {
            this.req = req;
            this.nodeId = req.path("broker").asInt();
        }

        void start() throws Exception {
            Properties p = new Properties();
            p.put("node.id", String.valueOf(nodeId));
            p.put("process.roles", "broker");
            p.put("controller.listener.names", "CONTROLLER");
            // Static voters, or (kraft.version 1) only bootstrap servers: the voter set is then
            // learnt from the controller's VotersRecord, as a broker with a dynamic quorum does.
            if (req.has("bootstrap_servers")) {
                p.put("controller.quorum.bootstrap.servers", req.path("bootstrap_servers").asText());
            } else {
                p.put("controller.quorum.voters", req.path("voters").asText());
            }
            p.put("listeners", "PLAINTEXT://127.0.0.1:0");
            List<String> dirs = new ArrayList<>();
            req.path("dirs").fields().forEachRemaining(e -> {
                dirs.add(e.getKey());
                logDirs.put(e.getKey(), Uuid.fromString(e.getValue().asText()));
            });
            p.put("log.dirs", String.join(",", dirs));
            p.put("metadata.log.dir", req.path("meta_dir").asText());
            p.put("broker.heartbeat.interval.ms", req.path("heartbeat_ms").asText("200"));
            p.put("initial.broker.registration.timeout.ms", "60000");
            if (req.has("cordoned")) {
                List<String> c = new ArrayList<>();
                req.path("cordoned").forEach(n -> c.add(n.asText()));
                p.put("cordoned.log.dirs", String.join(",", c));
            }
            if (req.has("rack")) p.put("broker.rack", req.path("rack").asText());
            req.path("props").fields().forEachRemaining(e -> p.put(e.getKey(), e.getValue().asText()));
            config = new AbstractKafkaConfig(AbstractKafkaConfig.CONFIG_DEF, p, Map.of(), false) { };
            QuorumConfig quorumConfig = new QuorumConfig(config);
            voters = QuorumConfig.parseVoterConnections(quorumConfig.voters());
            String clusterId = req.path("cluster_id").asText();
            LogContext ctx = new LogContext("[interop broker " + nodeId + "] ");

            // The observer: Kafka's raft client replicating the controller's log into a local
            // KafkaRaftLog, as a broker's KafkaRaftManager sets it up.
            File metaDir = new File(req.path("meta_dir").asText());
            File partitionDir = new File(metaDir, "__cluster_metadata-0");
            Files.createDirectories(partitionDir.toPath());
            scheduler = new KafkaScheduler(1, true, "interop-" + nodeId + "-scheduler-");
            scheduler.startup();
            raftLog = KafkaRaftLog.createLog(new TopicPartition("__cluster_metadata", 0), Uuid.METADATA_TOPIC_ID,
                    partitionDir, time, scheduler, new MetadataLogConfig(config), nodeId);
            ListenerName controllerListener = new ListenerName("CONTROLLER");
            NetworkClient netClient = raftNetworkClient(controllerListener, ctx, quorumConfig.requestTimeoutMs());
            KafkaNetworkChannel channel = new KafkaNetworkChannel(time, controllerListener, netClient,
                    quorumConfig.requestTimeoutMs(), "interop-" + nodeId + "-raft");
            channel.start();
            netChannel = channel;
            expiration = new TimingWheelExpirationService(new SystemTimer("interop-" + nodeId + "-raft-expiration"));
            raft = new KafkaRaftClient<>(OptionalInt.of(nodeId), Uuid.randomUuid(), MetadataRecordSerde.INSTANCE,
                    channel, raftLog, time, expiration, ctx, false, clusterId,
                    QuorumConfig.parseBootstrapServers(quorumConfig.bootstrapServers()), Endpoints.empty(),
                    new org.apache.kafka.common.feature.SupportedVersionRange((short) 0, (short) 1), quorumConfig);
            raft.initialize(voters, new FileQuorumStateStore(new File(partitionDir, "quorum-state")), metrics,
                    ignored -> { });
            loader = new MetadataLoader.Builder()
                    .setNodeId(nodeId)
                    .setThreadNamePrefix("interop-" + nodeId + "-")
                    .setTime(time)
                    .setFaultHandler(this::fault)
                    .setHighWaterMarkAccessor(raft::highWatermark)
                    .build();
            loader.installPublishers(List.of(new MetadataPublisher() {
                @Override public String name() { return "interop-image"; }
                @Override public void onMetadataUpdate(MetadataDelta delta, MetadataImage newImage, LoaderManifest m) {
                    image.set(newImage);
                }
                @Override public void close() { }
            })).get(10, TimeUnit.SECONDS);
            raft.register(loader);
            driver = new KafkaRaftClientDriver<>(raft, "interop-" + nodeId + "-raft", this::fault, ctx);
            driver.start();

            // The control plane: lifecycle and directory assignments, each over Kafka's real
            // channel manager, with the controller found as a broker finds it (the raft leader).
            boolean alwaysCordon = req.path("cordon_supported_override").asBoolean(false);
            lifecycle = new BrokerLifecycleManager(config, time, "interop-" + nodeId + "-", logDirs, () -> { },
                    () -> alwaysCordon || cordonSupported());
            NodeToControllerChannelManager heartbeatChannel = new RecordingChannel(channelManager("heartbeat"),
                    exchanges, "heartbeat");
            ListenerCollectionHolder listeners = new ListenerCollectionHolder();
            OptionalLong previous = req.has("previous_epoch") ? OptionalLong.of(req.path("previous_epoch").asLong())
                    : OptionalLong.empty();
            lifecycle.start(() -> loader.lastAppliedOffset(), heartbeatChannel, clusterId, listeners.listeners,
                    BrokerFeatures.createDefaultFeatureMap(BrokerFeatures.createDefault(false)), previous);
            NodeToControllerChannelManager assignChannel = new RecordingChannel(channelManager("directory-assignments"),
                    exchanges, "directory-assignments");
            assignments = new AssignmentsManager(time, assignChannel, nodeId, () -> {
                MetadataImage img = image.get();
                return img == null ? MetadataImage.EMPTY : img;
            }, dir -> {
                for (Map.Entry<String, Uuid> e : logDirs.entrySet()) if (e.getValue().equals(dir)) return e.getKey();
                return dir.toString();
            });
        }

        boolean cordonSupported() {
            MetadataImage img = image.get();
            return img != null && img.features().metadataVersion().map(v -> v.isCordonedLogDirsSupported()).orElse(false);
        }

        RuntimeException fault(String message, Throwable cause) {
            ObjectNode f = NODES.objectNode();
            f.put("message", message);
            if (cause != null) f.put("cause", cause.toString());
            faults.add(f);
            return new FaultHandlerException(message, cause);
        }

        Optional<Node> controllerNode() {
            LeaderAndEpoch le = raft.leaderAndEpoch();
            if (le.leaderId().isEmpty()) return Optional.empty();
            InetSocketAddress a = voters.get(le.leaderId().getAsInt());
            if (a == null) {
                // No static voters: the leader's endpoint from the raft client's voter set, as
                // a broker's RaftControllerNodeProvider finds it.
                return raft.voterNode(le.leaderId().getAsInt(), new ListenerName("CONTROLLER"));
            }
            return Optional.of(new Node(le.leaderId().getAsInt(), a.getHostString(), a.getPort()));
        }

        NodeToControllerChannelManager channelManager(String name) {
            return new NodeToControllerChannelManagerImpl(
                    () -> new ControllerInformation(controllerNode(), new ListenerName("CONTROLLER"),
                            SecurityProtocol.PLAINTEXT, ""),
                    time, metrics, config, name, "interop-" + nodeId + "-", Long.MAX_VALUE);
        }

        NetworkClient raftNetworkClient(ListenerName listener, LogContext ctx, int requestTimeoutMs) {
            ChannelBuilder builder = ChannelBuilders.clientChannelBuilder(SecurityProtocol.PLAINTEXT,
                    JaasContext.Type.SERVER, config, listener, "", time, ctx);
            Selector selector = new Selector(NetworkReceive.UNLIMITED, Selector.NO_IDLE_TIMEOUT_MS, metrics, time,
                    "raft-channel", Map.of(), false, builder, ctx);
            return new NetworkClient(selector, new ManualMetadataUpdater(), "raft-client-" + nodeId, 1, 50, 50,
                    Selectable.USE_DEFAULT_BUFFER_SIZE, Selectable.USE_DEFAULT_BUFFER_SIZE,
                    requestTimeoutMs, 10_000L, 30_000L, time, true, new ApiVersions(), ctx,
                    MetadataRecoveryStrategy.NONE, BootstrapConfiguration.DISABLED, false);
        }

        boolean reached(String until, JsonNode req) {
            switch (until) {
                case "caught_up": return lifecycle.initialCatchUpFuture().isDone();
                case "unfenced": return lifecycle.initialUnfenceFuture().isDone();
                case "registered": return lifecycle.brokerEpoch() >= 0;
                case "offset": return loader.lastAppliedOffset() >= req.path("offset").asLong();
                case "exchanges": {
                    String api = req.path("api").asText();
                    long n = exchanges.stream().filter(e -> e.path("api").asText().equals(api)).count();
                    return n >= req.path("count").asLong(1);
                }
                case "state": return lifecycle.state().name().equals(req.path("state").asText());
                default: throw new IllegalArgumentException("unknown wait condition " + until);
            }
        }

        ObjectNode describe() {
            ObjectNode o = ok();
            o.put("broker", nodeId);
            if (lifecycle != null) {
                o.put("state", lifecycle.state().name());
                o.put("epoch", lifecycle.brokerEpoch());
                o.put("caught_up", done(lifecycle.initialCatchUpFuture()));
                o.put("unfenced", done(lifecycle.initialUnfenceFuture()));
                o.put("controlled_shutdown", done(lifecycle.controlledShutdownFuture()));
            }
            if (loader != null) o.put("loader_offset", loader.lastAppliedOffset());
            if (raft != null) {
                OptionalLong hwm = raft.highWatermark();
                o.put("high_watermark", hwm.isPresent() ? hwm.getAsLong() : -1);
                LeaderAndEpoch le = raft.leaderAndEpoch();
                o.put("leader", le.leaderId().isPresent() ? le.leaderId().getAsInt() : -1);
                o.put("leader_epoch", le.epoch());
                o.put("log_end_offset", raftLog.endOffset().offset());
                o.put("kraft_version", raft.kraftVersion().featureLevel());
                if (le.leaderId().isPresent()) {
                    raft.voterNode(le.leaderId().getAsInt(), new ListenerName("CONTROLLER")).ifPresent(n ->
                        o.put("leader_voter_node", n.host() + ":" + n.port()));
                }
            }
            if (assignments != null) o.put("assignments_pending", assignments.numPending());
            o.put("faults", faults.size());
            return o;
        }

        static String done(CompletableFuture<Void> f) {
            if (!f.isDone()) return "pending";
            return f.isCompletedExceptionally() ? "failed" : "done";
        }

        ObjectNode assign(JsonNode req) throws Exception {
            CompletableFuture<Void> done = new CompletableFuture<>();
            assignments.onAssignment(new TopicIdPartition(Uuid.fromString(req.path("topic_id").asText()),
                    req.path("partition").asInt()), Uuid.fromString(req.path("dir").asText()),
                    req.path("reason").asText("interop test"), () -> done.complete(null));
            ObjectNode o = ok();
            if (req.path("wait").asBoolean(true)) {
                try {
                    done.get(req.path("timeout_ms").asLong(10000), TimeUnit.MILLISECONDS);
                    o.put("assigned", true);
                } catch (java.util.concurrent.TimeoutException e) {
                    o.put("assigned", false);
                }
            }
            o.put("pending", assignments.numPending());
            return o;
        }

        void stop() throws Exception {
            if (assignments != null) assignments.close();
            if (lifecycle != null) lifecycle.close();
            if (driver != null) {
                driver.shutdown();  // a graceful raft shutdown, then the client closes
            }
            if (netChannel != null) netChannel.close();
            if (loader != null) loader.close();
            if (expiration != null) expiration.shutdown();
            if (raftLog != null) raftLog.close();
            if (scheduler != null) scheduler.shutdown();
            metrics.close();
        }
    }

    /** The listeners a broker advertises (the PLAINTEXT one only; no data plane runs). */
    static final class ListenerCollectionHolder {
        final BrokerRegistrationRequestData.ListenerCollection listeners = new BrokerRegistrationRequestData.ListenerCollection();

        ListenerCollectionHolder() {
            listeners.add(new BrokerRegistrationRequestData.Listener().setName("PLAINTEXT").setHost("127.0.0.1")
                    .setPort(9092).setSecurityProtocol(SecurityProtocol.PLAINTEXT.id));
        }
    }

    /** kraft.version and the voter set of a metadata log directory (a copy: Kafka's log writes
     *  index and checkpoint files), as Kafka's raft client reads them at start-up: KafkaRaftLog
     *  plus KRaftControlRecordStateMachine over the latest snapshot and the log after it. */
    static final class QuorumProbe {
        static ObjectNode read(File partitionDir, int nodeId) throws Exception {
            Properties p = new Properties();
            p.put("node.id", String.valueOf(nodeId));
            p.put("process.roles", "controller");
            p.put("controller.listener.names", "CONTROLLER");
            p.put("listeners", "CONTROLLER://127.0.0.1:0");
            p.put("controller.quorum.bootstrap.servers", "127.0.0.1:1");
            p.put("metadata.log.dir", partitionDir.getParent());
            p.put("log.dirs", partitionDir.getParent());
            AbstractKafkaConfig config = new AbstractKafkaConfig(AbstractKafkaConfig.CONFIG_DEF, p, Map.of(), false) { };
            KafkaScheduler scheduler = new KafkaScheduler(1, true, "interop-quorum-probe-");
            scheduler.startup();
            KafkaRaftLog log = KafkaRaftLog.createLog(new TopicPartition("__cluster_metadata", 0), Uuid.METADATA_TOPIC_ID,
                    partitionDir, Time.SYSTEM, scheduler, new MetadataLogConfig(config), nodeId);
            try {
                org.apache.kafka.raft.internals.KRaftControlRecordStateMachine machine =
                    new org.apache.kafka.raft.internals.KRaftControlRecordStateMachine(
                        org.apache.kafka.raft.VoterSet.empty(), log, MetadataRecordSerde.INSTANCE, 8 * 1024 * 1024,
                        new LogContext("[interop quorum probe] "),
                        new org.apache.kafka.raft.internals.KafkaRaftMetrics(new Metrics(), "raft"), ignored -> { });
                machine.updateState();
                ObjectNode o = ok();
                o.put("kraft_version", machine.lastKraftVersion().featureLevel());
                o.put("last_voter_set_offset", machine.lastVoterSetOffset().orElse(-1));
                o.put("log_start_offset", log.startOffset());
                o.put("log_end_offset", log.endOffset().offset());
                log.latestSnapshotId().ifPresent(id -> o.put("latest_snapshot", id.offset() + "-" + id.epoch()));
                ArrayNode voters = o.putArray("voters");
                org.apache.kafka.raft.VoterSet set = machine.lastVoterSet();
                for (org.apache.kafka.raft.ReplicaKey key : set.voterKeys()) {
                    ObjectNode v = voters.addObject();
                    v.put("id", key.id());
                    v.put("directory", key.directoryId().map(Uuid::toString).orElse(""));
                    set.listeners(key.id()).address(new ListenerName("CONTROLLER")).ifPresent(a ->
                        v.put("controller", a.getHostString() + ":" + a.getPort()));
                }
                return o;
            } finally {
                log.close();
                scheduler.shutdown();
            }
        }
    }

    /** A metadata log directory read as a broker's loader reads it. */
    static final class LogLoader {
        static MetadataImage lastImage;

        static ObjectNode load(Path dir) throws Exception {
            Path partition = Files.isDirectory(dir.resolve("__cluster_metadata-0")) ? dir.resolve("__cluster_metadata-0") : dir;
            List<Path> segments;
            try (Stream<Path> s = Files.list(partition)) {
                segments = s.filter(f -> f.getFileName().toString().endsWith(".log")).sorted().collect(Collectors.toList());
            }
            List<ObjectNode> faults = new ArrayList<>();
            AtomicReference<MetadataImage> last = new AtomicReference<>(MetadataImage.EMPTY);
            FaultHandler handler = (message, cause) -> {
                ObjectNode f = NODES.objectNode();
                f.put("message", message);
                if (cause != null) f.put("cause", cause.toString());
                faults.add(f);
                return new FaultHandlerException(message, cause);
            };
            MetadataBatchLoader batchLoader = new MetadataBatchLoader(new LogContext("[interop load_log] "), Time.SYSTEM,
                    handler, (delta, image, manifest) -> last.set(image), SupportedConfigChecker.TRUE);
            LeaderAndEpoch le = new LeaderAndEpoch(OptionalInt.of(0), 1);
            long batches = 0, records = 0, controls = 0, lastOffset = -1;
            for (Path seg : segments) {
                // The bytes as they are now: the controller may still append to the active
                // segment, and a read-only FileRecords that sees the file grow fails on close
                // (it trims the channel to the size it opened with).
                {
                    MemoryRecords fr = MemoryRecords.readableRecords(ByteBuffer.wrap(Files.readAllBytes(seg)));
                    RecordsIterator<ApiMessageAndVersion> it = new RecordsIterator<>(fr, MetadataRecordSerde.INSTANCE,
                            BufferSupplier.create(), 8 * 1024 * 1024, true, new LogContext("[interop iterator] "));
                    while (it.hasNext()) {
                        Batch<ApiMessageAndVersion> batch = it.next();
                        batches++;
                        records += batch.records().size();
                        controls += batch.controlRecords().size();
                        lastOffset = batch.lastOffset();
                        batchLoader.loadBatch(batch, le);
                    }
                }
            }
            batchLoader.maybeFlushBatches(le, true);
            ObjectNode o = ok();
            o.put("segments", segments.size());
            o.put("batches", batches);
            o.put("records", records);
            o.put("control_records", controls);
            o.put("last_offset", lastOffset);
            ArrayNode f = o.putArray("faults");
            faults.forEach(f::add);
            o.set("image", ImageJson.of(last.get()));
            lastImage = last.get();
            snapshotRoundTrip(last.get(), o);
            return o;
        }

        /** Write the image as a snapshot would (MetadataImage.write), replay that into an empty
         *  image, and say whether anything was lost or came back different. */
        static void snapshotRoundTrip(MetadataImage image, ObjectNode o) {
            ArrayNode losses = o.putArray("snapshot_losses");
            if (image.features().metadataVersion().isEmpty()) {
                o.put("snapshot_round_trip_equal", image.isEmpty());
                return;
            }
            RecordListWriter writer = new RecordListWriter();
            image.write(writer, new ImageWriterOptions.Builder(image)
                    .setLossHandler(e -> losses.add(e.loss())).build());
            MetadataDelta delta = new MetadataDelta.Builder().setImage(MetadataImage.EMPTY).build();
            for (ApiMessageAndVersion r : writer.records()) delta.replay(r.message());
            MetadataImage again = delta.apply(image.provenance());
            o.put("snapshot_records", writer.records().size());
            o.put("snapshot_round_trip_equal", ImageJson.of(again).equals(ImageJson.of(image)));
        }
    }

    /** The parts of a MetadataImage the mock's views are compared with. */
    static final class ImageJson {
        static ObjectNode of(MetadataImage img) {
            ObjectNode o = NODES.objectNode();
            o.put("offset", img.provenance().lastContainedOffset());
            ObjectNode features = o.putObject("features");
            img.features().metadataVersion().ifPresent(v -> {
                features.put("metadata.version", v.featureLevel());
                features.put("metadata.version.name", v.version());
            });
            new TreeMap<>(img.features().finalizedVersions()).forEach((k, v) -> features.put(k, v));
            ArrayNode brokers = o.putArray("brokers");
            new TreeMap<>(img.cluster().brokers()).forEach((id, reg) -> brokers.add(broker(reg)));
            ArrayNode topics = o.putArray("topics");
            List<TopicImage> ts = new ArrayList<>(img.topics().topicsById().values());
            ts.sort((a, b) -> a.name().compareTo(b.name()));
            for (TopicImage t : ts) {
                ObjectNode tj = topics.addObject();
                tj.put("name", t.name());
                tj.put("id", t.id().toString());
                ArrayNode parts = tj.putArray("partitions");
                new TreeMap<>(t.partitions()).forEach((pid, p) -> parts.add(partition(pid, p, img)));
            }
            return o;
        }

        /** Kafka's own metadata cache answering a Metadata request for every topic on a listener. */
        static ArrayNode metadata(MetadataImage img, String listener) {
            KRaftMetadataCache cache = new KRaftMetadataCache(-1, () -> KRaftVersion.KRAFT_VERSION_0);
            cache.setImage(img);
            ArrayNode a = NODES.arrayNode();
            Set<String> names = new java.util.TreeSet<>(cache.getAllTopics());
            for (MetadataResponseData.MetadataResponseTopic t : cache.getTopicMetadata(names, new ListenerName(listener), false, false)) {
                a.add(MetadataResponseDataJsonConverter.MetadataResponseTopicJsonConverter.write(t, (short) 12));
            }
            return a;
        }

        static ObjectNode broker(BrokerRegistration reg) {
            ObjectNode b = NODES.objectNode();
            b.put("id", reg.id());
            b.put("epoch", reg.epoch());
            b.put("incarnation_id", reg.incarnationId().toString());
            b.put("fenced", reg.fenced());
            b.put("in_controlled_shutdown", reg.inControlledShutdown());
            b.put("rack", reg.rack().orElse(null));
            ArrayNode d = b.putArray("directories");
            reg.directories().forEach(u -> d.add(u.toString()));
            // null: the registration never carried the field (before 4.3-IV0).
            if (reg.cordonedDirectories() == null) {
                b.putNull("cordoned_directories");
            } else {
                ArrayNode c = b.putArray("cordoned_directories");
                reg.cordonedDirectories().forEach(u -> c.add(u.toString()));
            }
            ArrayNode l = b.putArray("endpoints");
            new TreeMap<>(reg.listeners()).forEach((n, e) -> l.add(n + "://" + e.host() + ":" + e.port()));
            return b;
        }

        static ObjectNode partition(int pid, PartitionRegistration p, MetadataImage img) {
            ObjectNode o = NODES.objectNode();
            o.put("partition", pid);
            o.put("leader", p.leader);
            o.put("leader_epoch", p.leaderEpoch);
            o.put("partition_epoch", p.partitionEpoch);
            o.put("leader_recovery_state", p.leaderRecoveryState.name());
            ints(o.putArray("replicas"), p.replicas);
            ints(o.putArray("isr"), p.isr);
            ints(o.putArray("elr"), p.elr);
            ints(o.putArray("last_known_elr"), p.lastKnownElr);
            ints(o.putArray("adding"), p.addingReplicas);
            ints(o.putArray("removing"), p.removingReplicas);
            ArrayNode d = o.putArray("directories");
            for (Uuid u : p.directories) d.add(u.toString());
            // Replicas whose broker is unregistered or no longer lists the replica's directory
            // (BrokerRegistration.hasOnlineDir, the directory half of Kafka's offline rule).
            ArrayNode off = o.putArray("replicas_in_offline_dirs");
            for (int r : p.replicas) {
                BrokerRegistration reg = img.cluster().broker(r);
                if (reg == null || !reg.hasOnlineDir(p.directory(r))) off.add(r);
            }
            return o;
        }

        static void ints(ArrayNode a, int[] xs) {
            for (int x : xs) a.add(x);
        }
    }
}
