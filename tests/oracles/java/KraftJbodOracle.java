/*
 * A long-lived differential-test oracle around the generated message classes of Apache Kafka's
 * kafka-clients jar (3.9.1 in the wheel the tests use).
 *
 * Protocol: one JSON object per line on stdin, exactly one JSON object per line on stdout,
 * flushed after every reply so a caller can run it in lock step or pipeline many requests.
 * Nothing else is ever written to stdout (System.out is pointed at stderr), and every failure,
 * including Errors thrown by the generated code, becomes {"ok":false,"error":...} so one bad
 * input never costs the caller a JVM restart. A request's optional "id" is echoed back.
 *
 * Ops: apis, decode, encode_json, quit. See tests/oracles/java_oracle.py for the Python side.
 *
 * Builds against kafka-clients 3.9 and Kafka 4.4 alike: the records classes moved to
 * org.apache.kafka.common.record.internal in 4.x, so they are looked up by name.
 */

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.io.Writer;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Modifier;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.message.ApiMessageType;
import org.apache.kafka.common.message.RequestHeaderData;
import org.apache.kafka.common.message.ResponseHeaderData;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.protocol.types.RawTaggedField;
import org.apache.kafka.common.protocol.types.Schema;

public final class KraftJbodOracle {
    private static final ObjectMapper MAPPER = new ObjectMapper();
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
    private static final HexFormat HEX = HexFormat.of();

    /** The generated converter's static read/write, adapted to Message so calls need no reflection. */
    private record Converter(MethodHandle read, MethodHandle write) { }

    // Looked up once per message class: reflection per line would dominate small messages.
    private static final Map<Class<?>, Converter> CONVERTERS = new HashMap<>();

    private static final Class<?> BASE_RECORDS = firstClass(
        "org.apache.kafka.common.record.BaseRecords", "org.apache.kafka.common.record.internal.BaseRecords");
    private static final Class<?> MEMORY_RECORDS = firstClass(
        "org.apache.kafka.common.record.MemoryRecords", "org.apache.kafka.common.record.internal.MemoryRecords");

    private KraftJbodOracle() { }

    private static Class<?> firstClass(String... names) {
        for (String name : names) {
            try {
                return Class.forName(name);
            } catch (ClassNotFoundException e) {
                // try the next location
            }
        }
        throw new IllegalStateException("none of " + String.join(", ", names) + " is on the class path");
    }

    public static void main(String[] args) throws IOException {
        Writer out = new BufferedWriter(new OutputStreamWriter(
            new FileOutputStream(FileDescriptor.out), StandardCharsets.UTF_8), 1 << 16);
        // Library code that prints must not corrupt the reply stream.
        System.setOut(new PrintStream(new FileOutputStream(FileDescriptor.err), true, StandardCharsets.UTF_8));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8), 1 << 16);
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            ObjectNode reply;
            JsonNode id = null;
            boolean quit = false;
            try {
                JsonNode req = MAPPER.readTree(line);
                id = req.get("id");
                String op = text(req, "op");
                switch (op) {
                    case "apis" -> reply = apis();
                    case "decode" -> reply = decode(req);
                    case "encode_json" -> reply = encodeJson(req);
                    case "quit" -> {
                        reply = ok();
                        quit = true;
                    }
                    default -> throw new IllegalArgumentException("unknown op '" + op + "'");
                }
            } catch (Throwable t) {
                reply = failure(t);
            }
            if (id != null) {
                reply.set("id", id);
            }
            out.write(MAPPER.writeValueAsString(reply));
            out.write('\n');
            out.flush();
            if (quit) {
                break;
            }
        }
    }

    private static ObjectNode ok() {
        ObjectNode node = NODES.objectNode();
        node.put("ok", true);
        return node;
    }

    private static ObjectNode failure(Throwable t) {
        // Reflection and method handles wrap the generated code's exception; report the real one.
        Throwable cause = t;
        while (cause instanceof InvocationTargetException && cause.getCause() != null) {
            cause = cause.getCause();
        }
        ObjectNode node = NODES.objectNode();
        node.put("ok", false);
        node.put("error", cause.getClass().getName() + ": " + cause.getMessage());
        return node;
    }

    private static String text(JsonNode req, String field) {
        JsonNode node = req.get(field);
        if (node == null || !node.isTextual()) {
            throw new IllegalArgumentException("missing string field '" + field + "'");
        }
        return node.textValue();
    }

    private static int integer(JsonNode req, String field) {
        JsonNode node = req.get(field);
        if (node == null || !node.canConvertToInt()) {
            throw new IllegalArgumentException("missing integer field '" + field + "'");
        }
        return node.intValue();
    }

    private static ObjectNode apis() {
        ArrayNode list = NODES.arrayNode();
        for (ApiMessageType type : ApiMessageType.values()) {
            short low = type.lowestSupportedVersion();
            short high = type.highestSupportedVersion(true);
            ObjectNode api = list.addObject();
            api.put("name", type.name);
            api.put("api_key", type.apiKey());
            api.put("lowest", low);
            api.put("highest", high);
            api.put("highest_stable", type.highestSupportedVersion(false));
            api.put("latest_version_unstable", type.latestVersionUnstable());
            ArrayNode listeners = api.putArray("listeners");
            for (ApiMessageType.ListenerType listener : type.listeners()) {
                listeners.add(listener.name());
            }
            ArrayNode reqHeader = api.putArray("request_header_versions");
            ArrayNode respHeader = api.putArray("response_header_versions");
            for (short v = low; v <= high; v++) {
                reqHeader.add(type.requestHeaderVersion(v));
                respHeader.add(type.responseHeaderVersion(v));
            }
            // The body's flexibility is separate from the header's (ApiVersions responses keep
            // header v0 while their body is flexible), so read it off the schema itself.
            api.set("request_flexible_versions", flexibleVersions(type.requestSchemas(), low, high));
            api.set("response_flexible_versions", flexibleVersions(type.responseSchemas(), low, high));
        }
        ObjectNode reply = ok();
        reply.set("apis", list);
        return reply;
    }

    private static ArrayNode flexibleVersions(Schema[] schemas, short low, short high) {
        ArrayNode versions = NODES.arrayNode();
        for (short v = low; v <= high; v++) {
            if (v < schemas.length && schemas[v] != null && schemas[v].get("_tagged_fields") != null) {
                versions.add(v);
            }
        }
        return versions;
    }

    private static Message newMessage(JsonNode req) {
        String kind = text(req, "kind");
        return switch (kind) {
            case "request" -> ApiMessageType.fromApiKey((short) integer(req, "api_key")).newRequest();
            case "response" -> ApiMessageType.fromApiKey((short) integer(req, "api_key")).newResponse();
            case "request_header" -> new RequestHeaderData();
            case "response_header" -> new ResponseHeaderData();
            default -> throw new IllegalArgumentException("unknown kind '" + kind + "'");
        };
    }

    private static short version(JsonNode req, Message m) {
        int v = integer(req, "version");
        // The generated readers trust the version they are given; outside the schema's range they
        // would quietly read some other layout, which is not an answer worth comparing against.
        if (v < m.lowestSupportedVersion() || v > m.highestSupportedVersion()) {
            throw new IllegalArgumentException("version " + v + " of " + m.getClass().getSimpleName()
                + " is outside " + m.lowestSupportedVersion() + ".." + m.highestSupportedVersion());
        }
        return (short) v;
    }

    private static ObjectNode decode(JsonNode req) throws Throwable {
        Message m = newMessage(req);
        short v = version(req, m);
        byte[] raw = HEX.parseHex(text(req, "hex"));
        ByteBuffer buf = ByteBuffer.wrap(raw);
        m.read(new ByteBufferAccessor(buf), v);
        ObjectNode reply = ok();
        reply.put("consumed", buf.position());
        reply.put("total", raw.length);
        reply.put("reencoded", HEX.formatHex(encode(m, v)));
        JsonNode json = (JsonNode) converter(m.getClass()).write.invokeExact(m, v);
        fillRecords(m, json);
        reply.set("json", json);
        ArrayNode unknown = reply.putArray("unknown_tags");
        List<RawTaggedField> fields = m.unknownTaggedFields();
        for (RawTaggedField field : fields) {
            ArrayNode pair = unknown.addArray();
            pair.add(field.tag());
            pair.add(HEX.formatHex(field.data()));
        }
        return reply;
    }

    private static ObjectNode encodeJson(JsonNode req) throws Throwable {
        Message template = newMessage(req);
        short v = version(req, template);
        JsonNode json = req.get("json");
        if (json == null || !json.isObject()) {
            throw new IllegalArgumentException("missing object field 'json'");
        }
        Message m = (Message) converter(template.getClass()).read.invokeExact(json, v);
        ObjectNode reply = ok();
        reply.put("hex", HEX.formatHex(encode(m, v)));
        return reply;
    }

    private static byte[] encode(Message m, short v) {
        ObjectSerializationCache cache = new ObjectSerializationCache();
        int size = m.size(cache, v);
        ByteBuffer buf = ByteBuffer.allocate(size);
        m.write(new ByteBufferAccessor(buf), cache, v);
        if (buf.position() != size) {
            throw new IllegalStateException("wrote " + buf.position() + " bytes but size() said " + size);
        }
        return buf.array();
    }

    /*
     * kafka-clients 3.9's JsonConverters write every records field as an empty byte string, yet
     * read a base64 string back into MemoryRecords. Putting the real bytes in makes the JSON a
     * faithful picture of what was decoded and lets it round trip through encode_json.
     * The generated field names are the JSON keys, and lists keep their order in both.
     */
    private static void fillRecords(Object data, JsonNode json) throws ReflectiveOperationException {
        if (!(json instanceof ObjectNode object)) {
            return;
        }
        for (Field field : walkableFields(data.getClass())) {
            Object value = field.get(data);
            JsonNode child = object.get(field.getName());
            if (value == null || child == null) {
                continue;
            }
            if (MEMORY_RECORDS.isInstance(value)) {
                ByteBuffer records = (ByteBuffer) MEMORY_RECORDS.getMethod("buffer").invoke(value);
                object.put(field.getName(), MessageUtil.byteBufferToArray(records));
            } else if (value instanceof Message nested) {
                fillRecords(nested, child);
            } else if (value instanceof Collection<?> items && child.isArray() && items.size() == child.size()) {
                int i = 0;
                for (Object item : items) {
                    if (item instanceof Message nested) {
                        fillRecords(nested, child.get(i));
                    }
                    i++;
                }
            }
        }
    }

    // Fields that can lead to a records value; scalars, strings and uuids never do.
    private static final Map<Class<?>, List<Field>> WALKABLE = new HashMap<>();

    private static List<Field> walkableFields(Class<?> type) {
        List<Field> cached = WALKABLE.get(type);
        if (cached != null) {
            return cached;
        }
        List<Field> fields = new ArrayList<>();
        for (Field field : type.getDeclaredFields()) {
            Class<?> ft = field.getType();
            boolean walkable = BASE_RECORDS.isAssignableFrom(ft) || Message.class.isAssignableFrom(ft)
                || Collection.class.isAssignableFrom(ft);
            if (walkable && !Modifier.isStatic(field.getModifiers()) && !field.getName().startsWith("_")) {
                field.setAccessible(true);
                fields.add(field);
            }
        }
        WALKABLE.put(type, fields);
        return fields;
    }

    private static Converter converter(Class<?> dataClass) throws ReflectiveOperationException {
        Converter cached = CONVERTERS.get(dataClass);
        if (cached != null) {
            return cached;
        }
        Class<?> conv = Class.forName(dataClass.getName() + "JsonConverter");
        MethodHandles.Lookup lookup = MethodHandles.publicLookup();
        MethodHandle read = lookup.findStatic(conv, "read", MethodType.methodType(dataClass, JsonNode.class, short.class))
            .asType(MethodType.methodType(Message.class, JsonNode.class, short.class));
        MethodHandle write = lookup.findStatic(conv, "write", MethodType.methodType(JsonNode.class, dataClass, short.class))
            .asType(MethodType.methodType(JsonNode.class, Message.class, short.class));
        Converter made = new Converter(read, write);
        CONVERTERS.put(dataClass, made);
        return made;
    }
}
