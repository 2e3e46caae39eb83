// The snapshot's readers on Kafka's Java AdminClient, one single-file program (it runs compiled once
// into the jar cache, or with Java's single-file source launcher when there is no javac, which takes
// one file: both readers live here and share the parent watch). The first argument names the reader:
//   share-groups    ShareGroupSnapshot: share groups as one JSON document
//                   (rebalance_advisor.adapters.share_groups)
//   batched-groups  BatchedGroupReader: many consumer groups, one JSON line each
//                   (rebalance_advisor.adapters.batched_groups)
// An unknown or missing first argument exits 2 with one line on stderr.
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedOutputStream;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsResult;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.MemberAssignment;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.protocol.Errors;

public class GroupReaders {
    public static void main(String[] args) throws Exception {
        exitWithParent();
        switch (args.length == 1 ? args[0] : "") {
            case "share-groups" -> ShareGroupSnapshot.run();
            case "batched-groups" -> BatchedGroupReader.run();
            default -> {
                System.err.println("GroupReaders: the first argument is share-groups or batched-groups");
                System.exit(2);
            }
        }
    }

    // The caller's process id is -Drebalance.advisor.parent (adapters/kafka_jars.py). The JVM runs in
    // a session of its own, so Ctrl-C at the terminal does not reach it, and a caller ended by a
    // signal it does not handle (SIGTERM, SIGKILL) cannot stop it: it halts itself as soon as that
    // process is no longer its parent.
    private static void exitWithParent() {
        String expected = System.getProperty("rebalance.advisor.parent");
        if (expected == null) {
            return;
        }
        long parent = Long.parseLong(expected);
        Thread watch = new Thread(() -> {
            while (ProcessHandle.current().parent().map(ProcessHandle::pid).orElse(-1L) == parent) {
                try {
                    Thread.sleep(200);
                } catch (InterruptedException e) {
                    return;
                }
            }
            Runtime.getRuntime().halt(3);
        }, "parent-watch");
        watch.setDaemon(true);
        watch.start();
    }
}

// Share groups (KIP-932) as Kafka's AdminClient sees them, printed as one JSON document.
//
// confluent-kafka has no admin API for share groups, so rebalance_advisor.adapters.share_groups runs
// this reader (share-groups) against the cached Kafka jars. The client
// configuration (bootstrap servers, security settings, credentials) arrives as Java properties on
// stdin, never on the command line. A failure of one group is reported in that group's "error"; a
// failure of the whole listing exits 2 with one line on stderr. "nul_group_ids": the ids of groups of
// any type that hold a NUL character (see groupIdsWithNul).
class ShareGroupSnapshot {
    static void run() throws Exception {
        Properties config = new Properties();
        config.load(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        long timeoutMs = Long.parseLong(config.getProperty("default.api.timeout.ms", "30000"));
        Map<String, Object> out = new LinkedHashMap<>();
        List<Object> groups = new ArrayList<>();
        out.put("groups", groups);
        try (Admin admin = Admin.create(config)) {
            List<String> ids = new ArrayList<>();
            try {
                for (GroupListing listing : admin.listGroups(ListGroupsOptions.forShareGroups()).all()
                        .get(timeoutMs, TimeUnit.MILLISECONDS)) {
                    ids.add(listing.groupId());
                }
            } catch (ExecutionException e) {
                System.err.println(rootCause(e));
                System.exit(2);
            }
            ids.sort(null);
            out.put("nul_group_ids", groupIdsWithNul(admin, timeoutMs));
            Map<String, KafkaFuture<ShareGroupDescription>> described =
                    admin.describeShareGroups(ids).describedGroups();
            Map<String, ListShareGroupOffsetsSpec> specs = new LinkedHashMap<>();
            for (String id : ids) {
                specs.put(id, new ListShareGroupOffsetsSpec());
            }
            var offsets = admin.listShareGroupOffsets(specs);
            for (String id : ids) {
                Map<String, Object> group = new LinkedHashMap<>();
                group.put("group_id", id);
                try {
                    ShareGroupDescription d = described.get(id).get(timeoutMs, TimeUnit.MILLISECONDS);
                    group.put("state", d.groupState() == null ? "unknown" : d.groupState().toString());
                    group.put("coordinator_id", d.coordinator() == null ? null : d.coordinator().id());
                    group.put("coordinator_host", d.coordinator() == null ? null
                            : d.coordinator().host() + ":" + d.coordinator().port());
                    List<Object> members = new ArrayList<>();
                    for (ShareMemberDescription m : d.members()) {
                        Map<String, Object> member = new LinkedHashMap<>();
                        member.put("member_id", m.consumerId());
                        member.put("client_id", m.clientId());
                        member.put("host", m.host());
                        member.put("rack", m.rackId().orElse(null));
                        List<Object> assignment = new ArrayList<>();
                        for (TopicPartition tp : m.assignment().topicPartitions()) {
                            assignment.add(List.of(tp.topic(), tp.partition()));
                        }
                        member.put("assignment", assignment);
                        members.add(member);
                    }
                    group.put("members", members);
                    List<Object> rows = new ArrayList<>();
                    Map<TopicPartition, SharePartitionOffsetInfo> info =
                            offsets.partitionsToOffsetInfo(id).get(timeoutMs, TimeUnit.MILLISECONDS);
                    for (Map.Entry<TopicPartition, SharePartitionOffsetInfo> e : info.entrySet()) {
                        Map<String, Object> row = new LinkedHashMap<>();
                        row.put("topic", e.getKey().topic());
                        row.put("partition", e.getKey().partition());
                        SharePartitionOffsetInfo value = e.getValue();
                        // A partition the group has not started on comes back without offsets.
                        row.put("start_offset", value == null ? null : value.startOffset());
                        row.put("leader_epoch", value == null ? null : value.leaderEpoch().orElse(null));
                        row.put("lag", value == null ? null : value.lag().orElse(null));
                        rows.add(row);
                    }
                    group.put("offsets", rows);
                } catch (ExecutionException e) {
                    group.put("error", rootCause(e));
                }
                groups.add(group);
            }
        }
        new ObjectMapper().writeValue(System.out, out);
    }

    // Every group id holding a NUL character (legal in Java): librdkafka, the snapshot's other Kafka
    // client, cuts ids at the NUL, so only this listing sees them whole. Unread, it is empty.
    private static List<String> groupIdsWithNul(Admin admin, long timeoutMs) throws InterruptedException {
        List<String> found = new ArrayList<>();
        try {
            for (GroupListing listing : admin.listGroups().all().get(timeoutMs, TimeUnit.MILLISECONDS)) {
                if (listing.groupId().indexOf('\0') >= 0) {
                    found.add(listing.groupId());
                }
            }
        } catch (ExecutionException | java.util.concurrent.TimeoutException e) {
            return List.of();
        }
        found.sort(null);
        return found;
    }

    private static String rootCause(Throwable error) {
        Throwable cause = error;
        while (cause.getCause() != null) {
            cause = cause.getCause();
        }
        return cause.getClass().getSimpleName() + ": " + cause.getMessage();
    }
}

// Many consumer groups described and their committed offsets read, batched per group coordinator.
//
// librdkafka's admin API sends one DescribeGroups and one OffsetFetch request per group, so a
// snapshot of tens of thousands of groups sends as many requests. Kafka's Java AdminClient puts every
// group of a coordinator into one request (KIP-709 for OffsetFetch). rebalance_advisor.adapters.
// batched_groups runs this reader (batched-groups) on the cached Kafka jars (docs/concepts/
// snapshots.md, "Fleet scale").
//
// stdin, two JSON lines: the Java client configuration (an object of strings), then the group ids (an
// array). The client connects as soon as the first line is read, while the caller is still listing.
// stdout, one JSON line per group, in the order asked; "d" the description or "de"/"dm" its error
// (code name, message); "o" the committed offsets or "oe"/"om" their error:
//   {"g": id,
//    "d": {"state": GroupState, "type": GroupType, "simple": bool, "assignor": name,
//          "coordinator": [id, "host:port"] or null,
//          "members": [[memberId, instanceId or null, clientId, host, [[topic, partition]...],
//                       [target assignment topic...]] ...]},
//    "o": [[topic, partition, offset, leaderEpoch or null, metadata], ...]}
// A failure before any group is read exits 2 with one line on stderr.
class BatchedGroupReader {
    private static final int GROUPS_PER_CALL = 2000;

    static void run() throws Exception {
        ObjectMapper json = new ObjectMapper();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Properties config = new Properties();
        Map<?, ?> given = json.readValue(requireLine(in.readLine()), Map.class);
        for (Map.Entry<?, ?> e : given.entrySet()) {
            config.setProperty(String.valueOf(e.getKey()), String.valueOf(e.getValue()));
        }
        long timeoutMs = Long.parseLong(config.getProperty("default.api.timeout.ms", "30000"));
        try (Admin admin = Admin.create(config)) {
            // Connect and learn the cluster while the caller lists its groups: no answer is needed here.
            admin.describeCluster().clusterId();
            String[] ids = json.readValue(requireLine(in.readLine()), String[].class);
            // Calls of GROUPS_PER_CALL groups, all in flight: smaller answers are decoded while the
            // broker works on the next (bench/snapshot.py --fleet measured 2,000 against one call).
            Map<String, KafkaFuture<ConsumerGroupDescription>> described = new LinkedHashMap<>();
            Map<String, KafkaFuture<Map<TopicPartition, OffsetAndMetadata>>> offsets = new LinkedHashMap<>();
            for (int start = 0; start < ids.length; start += GROUPS_PER_CALL) {
                List<String> chunk = Arrays.asList(ids).subList(start, Math.min(ids.length, start + GROUPS_PER_CALL));
                described.putAll(admin.describeConsumerGroups(chunk).describedGroups());
                Map<String, ListConsumerGroupOffsetsSpec> specs = new LinkedHashMap<>();
                for (String id : chunk) {
                    specs.put(id, new ListConsumerGroupOffsetsSpec());
                }
                ListConsumerGroupOffsetsResult result = admin.listConsumerGroupOffsets(specs);
                for (String id : chunk) {
                    offsets.put(id, result.partitionsToOffsetAndMetadata(id));
                }
            }
            JsonGenerator out = new JsonFactory().createGenerator(new BufferedOutputStream(System.out, 1 << 16));
            for (String id : ids) {
                out.writeStartObject();
                out.writeStringField("g", id);
                writeDescription(out, described.get(id), timeoutMs);
                writeOffsets(out, offsets.get(id), timeoutMs);
                out.writeEndObject();
                out.writeRaw('\n');
            }
            out.flush();
        }
    }

    private static String requireLine(String line) {
        if (line == null) {
            System.err.println("BatchedGroupReader: stdin ended before the configuration and group ids");
            System.exit(2);
        }
        return line;
    }

    private static void writeDescription(JsonGenerator out, KafkaFuture<ConsumerGroupDescription> future,
            long timeoutMs) throws Exception {
        ConsumerGroupDescription d = awaitOrWriteError(out, future, timeoutMs, "de", "dm");
        if (d == null) {
            return;
        }
        out.writeObjectFieldStart("d");
        out.writeStringField("state", d.groupState() == null ? "UNKNOWN" : d.groupState().name());
        out.writeStringField("type", d.type() == null ? "UNKNOWN" : d.type().name());
        out.writeBooleanField("simple", d.isSimpleConsumerGroup());
        out.writeStringField("assignor", d.partitionAssignor());
        Node c = d.coordinator();
        if (c == null) {
            out.writeNullField("coordinator");
        } else {
            out.writeArrayFieldStart("coordinator");
            out.writeNumber(c.id());
            out.writeString(c.host() + ":" + c.port());
            out.writeEndArray();
        }
        out.writeArrayFieldStart("members");
        for (MemberDescription m : d.members()) {
            out.writeStartArray();
            out.writeString(m.consumerId());
            out.writeString(m.groupInstanceId().orElse(null));
            out.writeString(m.clientId());
            out.writeString(m.host());
            out.writeStartArray();
            for (TopicPartition tp : m.assignment().topicPartitions()) {
                out.writeStartArray();
                out.writeString(tp.topic());
                out.writeNumber(tp.partition());
                out.writeEndArray();
            }
            out.writeEndArray();
            out.writeStartArray();
            TreeSet<String> target = new TreeSet<>();
            for (MemberAssignment a : m.targetAssignment().stream().toList()) {
                for (TopicPartition tp : a.topicPartitions()) {
                    target.add(tp.topic());
                }
            }
            for (String topic : target) {
                out.writeString(topic);
            }
            out.writeEndArray();
            out.writeEndArray();
        }
        out.writeEndArray();
        out.writeEndObject();
    }

    private static void writeOffsets(JsonGenerator out, KafkaFuture<Map<TopicPartition, OffsetAndMetadata>> future,
            long timeoutMs) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> offsets = awaitOrWriteError(out, future, timeoutMs, "oe", "om");
        if (offsets == null) {
            return;
        }
        out.writeArrayFieldStart("o");
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
            OffsetAndMetadata value = e.getValue();
            if (value == null) { // nothing committed on this partition
                continue;
            }
            out.writeStartArray();
            out.writeString(e.getKey().topic());
            out.writeNumber(e.getKey().partition());
            out.writeNumber(value.offset());
            Integer epoch = value.leaderEpoch().orElse(null);
            if (epoch == null) {
                out.writeNull();
            } else {
                out.writeNumber(epoch);
            }
            out.writeString(value.metadata());
            out.writeEndArray();
        }
        out.writeEndArray();
    }

    /** The future's value, or null once its failure is written (as {@link #writeError}). */
    private static <T> T awaitOrWriteError(JsonGenerator out, KafkaFuture<T> future, long timeoutMs,
            String codeField, String messageField) throws Exception {
        try {
            return future.get(timeoutMs, TimeUnit.MILLISECONDS);
        } catch (ExecutionException | TimeoutException e) {
            writeError(out, codeField, messageField, e);
            return null;
        }
    }

    /** A group's failure as Kafka's error code name and message (a wait past the deadline: timed out). */
    private static void writeError(JsonGenerator out, String codeField, String messageField, Exception e)
            throws Exception {
        Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
        String code = e instanceof TimeoutException ? Errors.REQUEST_TIMED_OUT.name() : Errors.forException(cause).name();
        out.writeStringField(codeField, code);
        out.writeStringField(messageField, String.valueOf(cause.getMessage()));
    }
}
