// Timing of Apache Kafka's own generated message codec (kafka-clients), the ceiling
// column of tools/bench/bench_codec.py. Written for this project; it only calls the
// public API of kafka-clients.
//
// Input on stdin, one case per block:
//   CASE <index> <apiKey> <request|response> <version> <rounds> <batchMs>
//   <hex of one distinct encoding>      (one line per input)
//   END
// Output: one line per case and operation, "RESULT <index> <decode|encode> <seconds per call>".
// Each operation is warmed up (JIT) for about a second, then timed in rounds of batches
// of about batchMs; the best round is kept, as the Python side does.

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

    static double time(Op op, int n, int rounds, double batchS) {
        // warm-up, then calibrate the batch length
        long until = System.nanoTime() + 1_000_000_000L;
        int i = 0;
        while (System.nanoTime() < until) op.run(i++ % n);
        long t0 = System.nanoTime();
        int calls = 0;
        while (System.nanoTime() - t0 < 50_000_000L) op.run(calls++ % n);
        double per = (System.nanoTime() - t0) / 1e9 / calls;
        int batch = Math.max(1, (int) (batchS / per));
        double best = Double.MAX_VALUE;
        for (int r = 0; r < rounds; r++) {
            long s = System.nanoTime();
            for (int k = 0; k < batch; k++) op.run(k % n);
            best = Math.min(best, (System.nanoTime() - s) / 1e9 / batch);
        }
        return best;
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            if (!line.startsWith("CASE ")) continue;
            String[] p = line.split(" ");
            String index = p[1];
            ApiMessageType type = ApiMessageType.fromApiKey(Short.parseShort(p[2]));
            boolean request = p[3].equals("request");
            short version = Short.parseShort(p[4]);
            int rounds = Integer.parseInt(p[5]);
            double batchS = Double.parseDouble(p[6]) / 1000.0;
            List<byte[]> inputs = new ArrayList<>();
            while (!(line = in.readLine()).equals("END")) inputs.add(HexFormat.of().parseHex(line.trim()));
            byte[][] data = inputs.toArray(new byte[0][]);
            ApiMessage first = decode(type, request, data[0], version);
            byte[] again = MessageUtil.byteBufferToArray(MessageUtil.toByteBuffer(first, version));
            if (!java.util.Arrays.equals(again, data[0])) throw new IllegalStateException("case " + index + " does not round-trip");
            double dec = time(k -> sink = decode(type, request, data[k], version), data.length, rounds, batchS);
            double enc = time(k -> sink = MessageUtil.toByteBuffer(first, version), 1, rounds, batchS);
            System.out.println("RESULT " + index + " decode " + dec);
            System.out.println("RESULT " + index + " encode " + enc);
            System.out.flush();
        }
    }
}
