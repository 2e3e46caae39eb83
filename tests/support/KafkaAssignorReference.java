// Kafka's own RangeAssignor and RoundRobinAssignor as the reference for ours (tests/integration/test_assignors_kafka_java.py).
//
// Run with Java 17's single-file source launcher, no build step:
//   java -cp '<kafka libs>/*' tests/support/KafkaAssignorReference.java < groups.txt
//
// Input, UTF-8, one item per line, fields separated by single spaces (names hold no whitespace):
//   group <id>
//   topic <name> <partition count>
//   member <member id> <group instance id, or . for none> <topic,topic,...>
//   end
// Output, per group, strategy and member (every member, in input order):
//   <range|roundrobin> <group id> <member id> [<topic> <partition>]...
// The assignors are called through their public entry point, assign(Cluster, GroupSubscription),
// with no racks, so Kafka's member order (static members first, by group instance id) applies.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;

public class KafkaAssignorReference {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        String groupId = null;
        List<PartitionInfo> partitions = new ArrayList<>();
        Map<String, Subscription> members = new LinkedHashMap<>();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) continue;
            String[] f = line.split(" ");
            switch (f[0]) {
                case "group":
                    groupId = f[1];
                    partitions.clear();
                    members.clear();
                    break;
                case "topic":
                    for (int p = 0; p < Integer.parseInt(f[2]); p++)
                        partitions.add(new PartitionInfo(f[1], p, null, new Node[0], new Node[0]));
                    break;
                case "member":
                    Subscription s = new Subscription(
                        Arrays.asList(f[3].split(",")), null, Collections.emptyList(), -1, Optional.empty());
                    if (!f[2].equals(".")) s.setGroupInstanceId(Optional.of(f[2]));
                    members.put(f[1], s);
                    break;
                case "end":
                    Cluster cluster = new Cluster("reference", Collections.emptyList(), partitions,
                        new HashSet<>(), new HashSet<>());
                    print(out, "range", groupId, new RangeAssignor(), cluster, members);
                    print(out, "roundrobin", groupId, new RoundRobinAssignor(), cluster, members);
                    break;
                default:
                    throw new IllegalArgumentException("bad line: " + line);
            }
        }
        out.flush();
    }

    static void print(PrintStream out, String name, String groupId, ConsumerPartitionAssignor assignor,
                      Cluster cluster, Map<String, Subscription> members) {
        Map<String, ConsumerPartitionAssignor.Assignment> result =
            assignor.assign(cluster, new GroupSubscription(members)).groupAssignment();
        for (String member : members.keySet()) {
            StringBuilder b = new StringBuilder(name).append(' ').append(groupId).append(' ').append(member);
            for (TopicPartition tp : result.get(member).partitions())
                b.append(' ').append(tp.topic()).append(' ').append(tp.partition());
            out.println(b);
        }
    }
}
