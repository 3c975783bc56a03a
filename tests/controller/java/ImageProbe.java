// Replays metadata records (one hex-encoded record value per stdin line, in log order) through
// Apache Kafka's own MetadataDelta and prints the resulting image's topics, configs and ACLs as
// sorted "key=value" lines. Written for this project's tests: Kafka's loader is the judge of
// whether our records mean what our image says they mean.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.util.*;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.image.*;
import org.apache.kafka.metadata.MetadataRecordSerde;
import org.apache.kafka.metadata.PartitionRegistration;
import org.apache.kafka.metadata.authorizer.StandardAcl;
import org.apache.kafka.server.common.ApiMessageAndVersion;

public class ImageProbe {
    static String ints(int[] a) {
        return Arrays.toString(a).replace(" ", "");
    }

    public static void main(String[] args) throws Exception {
        // One delta per record, applied at once: as a broker's loader that publishes every
        // committed batch (Kafka's ConfigurationsDelta drops a deleted topic's configs only
        // when they are already in the image the delta starts from).
        MetadataImage image = MetadataImage.EMPTY;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            byte[] raw = HexFormat.of().parseHex(line.trim());
            ApiMessageAndVersion rec = MetadataRecordSerde.INSTANCE.read(new ByteBufferAccessor(ByteBuffer.wrap(raw)), raw.length);
            MetadataDelta delta = new MetadataDelta.Builder().setImage(image).build();
            delta.replay(rec.message());
            image = delta.apply(MetadataProvenance.EMPTY);
        }
        List<String> out = new ArrayList<>();
        for (TopicImage t : image.topics().topicsByName().values()) {
            for (Map.Entry<Integer, PartitionRegistration> e : t.partitions().entrySet()) {
                PartitionRegistration p = e.getValue();
                out.add("partition." + t.name() + "-" + e.getKey() + "=replicas:" + ints(p.replicas) + " isr:" + ints(p.isr)
                    + " leader:" + p.leader + " leaderEpoch:" + p.leaderEpoch + " partitionEpoch:" + p.partitionEpoch
                    + " adding:" + ints(p.addingReplicas) + " removing:" + ints(p.removingReplicas)
                    + " recovery:" + p.leaderRecoveryState.value());
            }
        }
        for (Map.Entry<ConfigResource, ConfigurationImage> e : image.configs().resourceData().entrySet()) {
            for (Map.Entry<String, String> kv : new TreeMap<>(e.getValue().toMap()).entrySet()) {
                out.add("config." + e.getKey().type().id() + "/" + e.getKey().name() + "/" + kv.getKey() + "=" + kv.getValue());
            }
        }
        for (Map.Entry<Uuid, StandardAcl> e : image.acls().acls().entrySet()) {
            StandardAcl a = e.getValue();
            out.add("acl." + e.getKey() + "=" + a.resourceType().code() + "/" + a.resourceName() + "/" + a.patternType().code()
                + "/" + a.principal() + "/" + a.host() + "/" + a.operation().code() + "/" + a.permissionType().code());
        }
        out.add("metadata.version=" + image.features().metadataVersion().map(v -> (int) v.featureLevel()).orElse(-1));
        Collections.sort(out);
        for (String s : out) System.out.println(s);
    }
}
