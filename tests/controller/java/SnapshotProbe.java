// Judges this project's KRaft snapshots with Apache Kafka's own snapshot reader and image.
//
// Arguments: <log-hex-file> <snapshot-dir> <end-offset> <epoch>. The log file holds one
// hex-encoded metadata record value per line, in log order (the log the snapshot stands for).
// The probe opens <snapshot-dir>/<end-offset>-<epoch>.checkpoint with FileRawSnapshotReader and
// RecordsSnapshotReader (CRC checks on), replays its records through MetadataDelta, and
// replays the log the same way. It prints, one per line:
//   header.lastContainedLogTimestamp=<ms>
//   equal.<area>=<true|false>   for every area of the two images
//   kafka.write=<hex>           Kafka's own MetadataImage.write of the log image, one record a line
//   snapshot.record=<hex>       the snapshot's records as Kafka re-serialises them
// Written for this project's tests.

import java.io.BufferedReader;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.*;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.utils.internals.BufferSupplier;
import org.apache.kafka.common.utils.internals.LogContext;
import org.apache.kafka.image.*;
import org.apache.kafka.image.writer.ImageWriterOptions;
import org.apache.kafka.image.writer.RecordListWriter;
import org.apache.kafka.metadata.MetadataRecordSerde;
import org.apache.kafka.raft.Batch;
import org.apache.kafka.server.common.ApiMessageAndVersion;
import org.apache.kafka.server.common.OffsetAndEpoch;
import org.apache.kafka.snapshot.FileRawSnapshotReader;
import org.apache.kafka.snapshot.RecordsSnapshotReader;

public class SnapshotProbe {
    static String hex(ApiMessageAndVersion rec) {
        ObjectSerializationCache cache = new ObjectSerializationCache();
        int size = MetadataRecordSerde.INSTANCE.recordSize(rec, cache);
        ByteBuffer buf = ByteBuffer.allocate(size);
        MetadataRecordSerde.INSTANCE.write(rec, cache, new ByteBufferAccessor(buf));
        return HexFormat.of().formatHex(buf.array());
    }

    public static void main(String[] args) throws Exception {
        MetadataImage fromLog = MetadataImage.EMPTY;
        try (BufferedReader in = Files.newBufferedReader(Path.of(args[0]))) {
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isBlank()) continue;
                byte[] raw = HexFormat.of().parseHex(line.trim());
                ApiMessageAndVersion rec = MetadataRecordSerde.INSTANCE.read(new ByteBufferAccessor(ByteBuffer.wrap(raw)), raw.length);
                MetadataDelta delta = new MetadataDelta.Builder().setImage(fromLog).build();
                delta.replay(rec.message());
                fromLog = delta.apply(MetadataProvenance.EMPTY);
            }
        }
        OffsetAndEpoch id = new OffsetAndEpoch(Long.parseLong(args[2]), Integer.parseInt(args[3]));
        List<String> out = new ArrayList<>();
        MetadataDelta delta = new MetadataDelta.Builder().setImage(MetadataImage.EMPTY).build();
        long ts;
        try (RecordsSnapshotReader<ApiMessageAndVersion> reader = RecordsSnapshotReader.of(
                FileRawSnapshotReader.open(Path.of(args[1]), id), MetadataRecordSerde.INSTANCE,
                BufferSupplier.create(), 8 * 1024 * 1024, true, new LogContext())) {
            while (reader.hasNext()) {
                Batch<ApiMessageAndVersion> batch = reader.next();
                for (ApiMessageAndVersion rec : batch.records()) {
                    delta.replay(rec.message());
                    out.add("snapshot.record=" + hex(rec));
                }
            }
            ts = reader.lastContainedLogTimestamp();
        }
        MetadataImage fromSnapshot = delta.apply(new MetadataProvenance(id.offset() - 1, id.epoch(), ts, true));
        out.add("header.lastContainedLogTimestamp=" + ts);
        out.add("equal.features=" + fromLog.features().equals(fromSnapshot.features()));
        out.add("equal.cluster=" + fromLog.cluster().equals(fromSnapshot.cluster()));
        out.add("equal.topics=" + fromLog.topics().equals(fromSnapshot.topics()));
        out.add("equal.configs=" + fromLog.configs().equals(fromSnapshot.configs()));
        out.add("equal.producerIds=" + fromLog.producerIds().equals(fromSnapshot.producerIds()));
        out.add("equal.acls=" + fromLog.acls().equals(fromSnapshot.acls()));
        out.add("count.brokers=" + fromSnapshot.cluster().brokers().size());
        out.add("count.topics=" + fromSnapshot.topics().topicsById().size());
        RecordListWriter writer = new RecordListWriter();
        fromLog.write(writer, new ImageWriterOptions.Builder(fromLog).build());
        for (ApiMessageAndVersion rec : writer.records()) out.add("kafka.write=" + hex(rec));
        for (String s : out) System.out.println(s);
    }
}
