// Kafka's own Admin client against fake brokers' client listeners. Usage:
//   LogDirsProbe BOOTSTRAP describe BROKER...          -> "cluster ..." lines, then one line per log dir
//   LogDirsProbe BOOTSTRAP alter TOPIC PART BROKER DIR -> "alter OK" or "alter ERROR <exception class>"
// Each log dir line: "dir BROKER PATH ERROR total=N usable=N cordoned=B replicas=topic-p[:future],..."
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionReplica;

public class LogDirsProbe {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        try (Admin admin = Admin.create(p)) {
            if (args[1].equals("describe")) {
                DescribeClusterResult c = admin.describeCluster();
                System.out.println("cluster " + c.clusterId().get() + " controller " + c.controller().get().id());
                for (Node n : c.nodes().get()) System.out.println("node " + n.id() + " " + n.host() + ":" + n.port());
                List<Integer> brokers = new ArrayList<>();
                for (int i = 2; i < args.length; i++) brokers.add(Integer.parseInt(args[i]));
                Map<Integer, Map<String, LogDirDescription>> all = admin.describeLogDirs(brokers).allDescriptions().get();
                for (Map.Entry<Integer, Map<String, LogDirDescription>> b : new TreeMap<>(all).entrySet()) {
                    for (Map.Entry<String, LogDirDescription> d : new TreeMap<>(b.getValue()).entrySet()) {
                        LogDirDescription desc = d.getValue();
                        StringBuilder reps = new StringBuilder();
                        for (Map.Entry<TopicPartition, ReplicaInfo> r : desc.replicaInfos().entrySet()) {
                            if (reps.length() > 0) reps.append(",");
                            reps.append(r.getKey()).append(r.getValue().isFuture() ? ":future" : "");
                        }
                        String err = desc.error() == null ? "NONE" : desc.error().getClass().getSimpleName();
                        System.out.println("dir " + b.getKey() + " " + d.getKey() + " " + err
                            + " total=" + desc.totalBytes().orElse(-1L) + " usable=" + desc.usableBytes().orElse(-1L)
                            + " cordoned=" + desc.isCordoned() + " replicas=" + reps);
                    }
                }
            } else if (args[1].equals("alter")) {
                TopicPartitionReplica r = new TopicPartitionReplica(args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]));
                try {
                    admin.alterReplicaLogDirs(Map.of(r, args[5])).all().get();
                    System.out.println("alter OK");
                } catch (ExecutionException e) {
                    System.out.println("alter ERROR " + e.getCause().getClass().getSimpleName());
                }
            }
        }
    }
}
