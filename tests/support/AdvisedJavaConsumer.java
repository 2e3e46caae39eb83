import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;

/**
 * A plain Java subscribe() consumer on the consumer protocol asking the broker for an assignor
 * (args: bootstrap group topic assignor). It prints its member id and each new assignment as one
 * line of JSON, and stops when its stdin closes. An error is printed as {"error": "..."} and ends it.
 */
public class AdvisedJavaConsumer {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        props.put("group.protocol", "consumer");
        props.put("group.remote.assignor", args[3]);
        props.put("enable.auto.commit", "false");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in));
        Thread watcher = new Thread(() -> {
            try {
                while (stdin.readLine() != null) { }
            } catch (Exception ignored) { }
            System.exit(0);
        });
        watcher.setDaemon(true);
        watcher.start();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(args[2]));
            String last = null;
            while (true) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                TreeSet<Integer> owned = new TreeSet<>();
                for (TopicPartition tp : consumer.assignment()) {
                    owned.add(tp.partition());
                }
                String line = "{\"member_id\": \"" + consumer.groupMetadata().memberId() + "\", \"partitions\": "
                    + owned + "}";
                if (!line.equals(last)) {
                    System.out.println(line);
                    System.out.flush();
                    last = line;
                }
            }
        } catch (Exception error) {
            System.out.println("{\"error\": \"" + error.getClass().getSimpleName() + ": "
                + String.valueOf(error.getMessage()).replace("\"", "'") + "\"}");
            System.out.flush();
        }
    }
}
