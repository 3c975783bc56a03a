// Drives Apache Kafka's own Admin client (kafka-clients) against kraft-jbod and prints one
// "key=value" line per observation. Mode "controller" bootstraps with bootstrap.controllers
// (KIP-919, as kafka-metadata-quorum --bootstrap-controller does); mode "client" talks to
// the client listener as an application would. Written for this project's tests.

import java.util.*;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.acl.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.resource.*;

public class AdminProbe {
    static void out(String key, Object value) {
        System.out.println(key + "=" + value);
    }

    static String error(Throwable t) {
        Throwable c = t.getCause() != null ? t.getCause() : t;
        return c.getClass().getSimpleName();
    }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(args[0].equals("controller") ? "bootstrap.controllers" : "bootstrap.servers", args[1]);
        p.put("request.timeout.ms", "10000");
        p.put("default.api.timeout.ms", "15000");
        try (Admin admin = Admin.create(p)) {
            if (args[0].equals("controller")) controller(admin); else client(admin);
        }
    }

    static void controller(Admin admin) throws Exception {
        DescribeClusterResult cluster = admin.describeCluster();
        out("cluster.id", cluster.clusterId().get(15, TimeUnit.SECONDS));
        List<Integer> ids = new ArrayList<>();
        for (Node n : cluster.nodes().get(15, TimeUnit.SECONDS)) ids.add(n.id());
        out("cluster.nodes", ids);
        QuorumInfo q = admin.describeMetadataQuorum().quorumInfo().get(15, TimeUnit.SECONDS);
        out("quorum.leader", q.leaderId());
        out("quorum.epoch", q.leaderEpoch());
        out("quorum.hw", q.highWatermark());
        List<Integer> voters = new ArrayList<>();
        for (QuorumInfo.ReplicaState r : q.voters()) voters.add(r.replicaId());
        out("quorum.voters", voters);
        List<Integer> observers = new ArrayList<>();
        for (QuorumInfo.ReplicaState r : q.observers()) observers.add(r.replicaId());
        Collections.sort(observers);
        out("quorum.observers", observers);
        FeatureMetadata f = admin.describeFeatures().featureMetadata().get(15, TimeUnit.SECONDS);
        out("features.metadata.version", f.finalizedFeatures().get("metadata.version").maxVersionLevel());
        ConfigResource cluster_default = new ConfigResource(ConfigResource.Type.BROKER, "");
        try {
            admin.incrementalAlterConfigs(Map.of(cluster_default, List.of(new AlterConfigOp(
                new ConfigEntry("log.retention.ms", "123456"), AlterConfigOp.OpType.SET)))).all().get(15, TimeUnit.SECONDS);
            out("alter.cluster", "ok");
        } catch (Exception e) {
            out("alter.cluster", error(e));
        }
        Config c = admin.describeConfigs(List.of(cluster_default)).all().get(15, TimeUnit.SECONDS).get(cluster_default);
        ConfigEntry e = c.get("log.retention.ms");
        out("describe.cluster.log.retention.ms", e == null ? "missing" : e.value() + "/" + e.source());
    }

    static void client(Admin admin) throws Exception {
        NewTopic t = new NewTopic("jt", 2, (short) 2);
        admin.createTopics(List.of(t)).all().get(15, TimeUnit.SECONDS);
        out("create", "ok");
        try {
            admin.createTopics(List.of(t)).all().get(15, TimeUnit.SECONDS);
            out("create.again", "ok");
        } catch (Exception e) {
            out("create.again", error(e));
        }
        admin.createPartitions(Map.of("jt", NewPartitions.increaseTo(3))).all().get(15, TimeUnit.SECONDS);
        out("partitions", admin.describeTopics(List.of("jt")).allTopicNames().get(15, TimeUnit.SECONDS)
            .get("jt").partitions().size());
        ConfigResource topic = new ConfigResource(ConfigResource.Type.TOPIC, "jt");
        admin.incrementalAlterConfigs(Map.of(topic, List.of(
            new AlterConfigOp(new ConfigEntry("retention.ms", "1000"), AlterConfigOp.OpType.SET),
            new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND))))
            .all().get(15, TimeUnit.SECONDS);
        Config cfg = admin.describeConfigs(List.of(topic)).all().get(15, TimeUnit.SECONDS).get(topic);
        out("config.retention.ms", cfg.get("retention.ms").value() + "/" + cfg.get("retention.ms").source());
        out("config.cleanup.policy", cfg.get("cleanup.policy").value());
        try {
            admin.incrementalAlterConfigs(Map.of(topic, List.of(
                new AlterConfigOp(new ConfigEntry("no.such.config", "1"), AlterConfigOp.OpType.SET))))
                .all().get(15, TimeUnit.SECONDS);
            out("config.bad", "ok");
        } catch (Exception e) {
            out("config.bad", error(e));
        }
        AclBinding acl = new AclBinding(new ResourcePattern(ResourceType.TOPIC, "jt", PatternType.LITERAL),
            new AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW));
        admin.createAcls(List.of(acl)).all().get(15, TimeUnit.SECONDS);
        out("acls.described", admin.describeAcls(AclBindingFilter.ANY).values().get(15, TimeUnit.SECONDS).size());
        out("acls.deleted", admin.deleteAcls(List.of(AclBindingFilter.ANY)).all().get(15, TimeUnit.SECONDS).size());
        TopicPartition tp = new TopicPartition("jt", 0);
        List<Integer> replicas = admin.describeTopics(List.of("jt")).allTopicNames().get(15, TimeUnit.SECONDS)
            .get("jt").partitions().get(0).replicas().stream().map(Node::id).toList();
        List<Integer> target = new ArrayList<>(replicas);
        Collections.reverse(target);
        admin.alterPartitionReassignments(Map.of(tp, Optional.of(new NewPartitionReassignment(target))))
            .all().get(15, TimeUnit.SECONDS);
        out("reassign.ongoing", admin.listPartitionReassignments().reassignments().get(15, TimeUnit.SECONDS).size());
        try {
            admin.electLeaders(ElectionType.PREFERRED, Set.of(tp)).all().get(15, TimeUnit.SECONDS);
            out("elect", "ok");
        } catch (Exception e) {
            out("elect", error(e));
        }
        admin.deleteTopics(List.of("jt")).all().get(15, TimeUnit.SECONDS);
        out("delete", "ok");
    }
}
