// Timing of Apache Kafka's own generated message codec (kafka-clients), the ceiling
// column of tools/bench/bench_codec.py. Written for this project; it only calls the
// public API of kafka-clients.
//
// Input on stdin, one case per block:
//   CASE <index> <apiKey> <request|response> <version> <rounds> <batchMs>
//   <hex of one distinct encoding>      (one line per input)
//   END
// Output: one line per case and operation, "RESULT <index> <decode|encode> <seconds per call>".
// All cases are read first and every operation of every case is warmed up (JIT) before
// any is timed, so later cases do not profit from earlier ones' warm-up; then each is
// timed in rounds of batches of about batchMs and the best round is kept, as the Python
// side does.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

import org.apache.kafka.common.message.ApiMessageType;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.MessageUtil;

public final class CodecBench {
    static volatile Object sink;

    interface Op { void run(int i); }

    static ApiMessage decode(ApiMessageType type, boolean request, byte[] data, short version) {
        ApiMessage m = request ? type.newRequest() : type.newResponse();
        ByteBufferAccessor acc = new ByteBufferAccessor(ByteBuffer.wrap(data));
        m.read(acc, version);
        if (acc.remaining() != 0) throw new IllegalStateException("trailing bytes");
        return m;
    }

    // CPU time of this thread, like the Python side's process_time (a loaded machine's
    // descheduling is not charged); the JVM's separate GC and JIT threads are not counted.
    static final java.lang.management.ThreadMXBean THREADS = java.lang.management.ManagementFactory.getThreadMXBean();

    static long cpu() { return THREADS.getCurrentThreadCpuTime(); }

    static double time(Op op, int n, int rounds, double batchS) {
        // warm-up, then calibrate the batch length
        long until = System.nanoTime() + 500_000_000L;
        int i = 0;
        while (System.nanoTime() < until) op.run(i++ % n);
        long t0 = cpu();
        int calls = 0;
        while (cpu() - t0 < 50_000_000L) op.run(calls++ % n);
        double per = (cpu() - t0) / 1e9 / calls;
        int batch = Math.max(1, (int) (batchS / per));
        double best = Double.MAX_VALUE;
        for (int r = 0; r < rounds; r++) {
            long s = cpu();
            for (int k = 0; k < batch; k++) op.run(k % n);
            best = Math.min(best, (cpu() - s) / 1e9 / batch);
        }
        return best;
    }

    record Case(String index, ApiMessageType type, boolean request, short version, int rounds, double batchS,
                byte[][] data, ApiMessage first) {}

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        List<Case> cases = new ArrayList<>();
        String line;
        while ((line = in.readLine()) != null) {
            if (!line.startsWith("CASE ")) continue;
            String[] p = line.split(" ");
            ApiMessageType type = ApiMessageType.fromApiKey(Short.parseShort(p[2]));
            boolean request = p[3].equals("request");
            short version = Short.parseShort(p[4]);
            List<byte[]> inputs = new ArrayList<>();
            while (!(line = in.readLine()).equals("END")) inputs.add(HexFormat.of().parseHex(line.trim()));
            byte[][] data = inputs.toArray(new byte[0][]);
            ApiMessage first = decode(type, request, data[0], version);
            byte[] again = MessageUtil.byteBufferToArray(MessageUtil.toByteBuffer(first, version));
            if (!java.util.Arrays.equals(again, data[0])) throw new IllegalStateException("case " + p[1] + " does not round-trip");
            cases.add(new Case(p[1], type, request, version, Integer.parseInt(p[5]), Double.parseDouble(p[6]) / 1000.0, data, first));
        }
        for (int pass = 0; pass < 2; pass++) {
            for (Case c : cases) {
                time(k -> sink = decode(c.type(), c.request(), c.data()[k], c.version()), c.data().length, 1, 0.01);
                time(k -> sink = MessageUtil.toByteBuffer(c.first(), c.version()), 1, 1, 0.01);
            }
        }
        for (Case c : cases) {
            double dec = time(k -> sink = decode(c.type(), c.request(), c.data()[k], c.version()), c.data().length, c.rounds(), c.batchS());
            double enc = time(k -> sink = MessageUtil.toByteBuffer(c.first(), c.version()), 1, c.rounds(), c.batchS());
            System.out.println("RESULT " + c.index() + " decode " + dec);
            System.out.println("RESULT " + c.index() + " encode " + enc);
            System.out.flush();
        }
    }
}
