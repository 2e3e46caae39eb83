// Share groups (KIP-932) as Kafka's AdminClient sees them, printed as one JSON document.
//
// confluent-kafka has no admin API for share groups, so rebalance_advisor.adapters.share_groups runs
// this file with Java's single-file source launcher against the cached Kafka jars. The client
// configuration (bootstrap servers, security settings, credentials) arrives as Java properties on
// stdin, never on the command line. A failure of one group is reported in that group's "error"; a
// failure of the whole listing exits 2 with one line on stderr. "nul_group_ids": the ids of groups of
// any type that hold a NUL character (see groupIdsWithNul).
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;

public class ShareGroupSnapshot {
    public static void main(String[] args) throws Exception {
        exitWithParent();
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

    // The caller's process id is -Drebalance.advisor.parent (adapters/kafka_jars.py). The JVM runs in
    // a session of its own, so Ctrl-C at the terminal does not reach it, and a caller ended by a
    // signal it does not handle (SIGTERM, SIGKILL) cannot stop it: it halts itself as soon as that
    // process is no longer its parent.
    // The same watch is in ShareGroupSnapshot.java and BatchedGroupReader.java (single-file programs).
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
