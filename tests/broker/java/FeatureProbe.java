// Prints the feature ranges Kafka's own broker code registers: one "name min max" line per
// feature of BrokerFeatures.defaultSupportedFeatures(false), then "latest_production LEVEL".
import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.common.feature.SupportedVersionRange;
import org.apache.kafka.server.BrokerFeatures;
import org.apache.kafka.server.common.MetadataVersion;

public class FeatureProbe {
    public static void main(String[] args) {
        Map<String, SupportedVersionRange> ranges =
            new TreeMap<>(BrokerFeatures.defaultSupportedFeatures(false).features());
        for (Map.Entry<String, SupportedVersionRange> e : ranges.entrySet()) {
            System.out.println(e.getKey() + " " + e.getValue().min() + " " + e.getValue().max());
        }
        System.out.println("latest_production " + MetadataVersion.latestProduction().featureLevel());
    }
}
