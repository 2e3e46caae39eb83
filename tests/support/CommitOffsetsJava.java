// Commits offsets for a group through Kafka's Java AdminClient, which takes any group id Java can
// hold, a NUL character included (tests/integration/test_snapshot_edges.py): librdkafka's ids are
// C strings and cannot carry one.
//
// Run with Java 17's single-file source launcher, no build step:
//   java -cp '<kafka libs>/*' tests/support/CommitOffsetsJava.java < request.txt
//
// Input, one value a line: bootstrap servers, the topic, then "<group> <partition> <offset>" lines
// (a group id without spaces, "\0" standing for NUL). Output: "committed" once all are.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

public class CommitOffsetsJava {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Properties config = new Properties();
        config.setProperty("bootstrap.servers", in.readLine());
        String topic = in.readLine();
        Map<String, Map<TopicPartition, OffsetAndMetadata>> offsets = new LinkedHashMap<>();
        String line;
        while ((line = in.readLine()) != null && !line.isEmpty()) {
            String[] f = line.split(" ");
            offsets.computeIfAbsent(f[0].replace("\\0", "\0"), g -> new HashMap<>())
                .put(new TopicPartition(topic, Integer.parseInt(f[1])), new OffsetAndMetadata(Long.parseLong(f[2])));
        }
        try (Admin admin = Admin.create(config)) {
            for (Map.Entry<String, Map<TopicPartition, OffsetAndMetadata>> e : offsets.entrySet()) {
                admin.alterConsumerGroupOffsets(e.getKey(), e.getValue()).all().get(60, TimeUnit.SECONDS);
            }
        }
        System.out.println("committed");
    }
}
