import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Properties;

/**
 * A plain Java subscribe() consumer on the consumer protocol with the broker's advised assignor and
 * auto-commit, for bench/broker_trigger.py (args: bootstrap group topic client.id [instance.id]).
 * It prints "ready" once subscribed, then one line per processed record: "epoch_ms partition offset",
 * and stops (closing the consumer, which commits) when its stdin closes.
 */
public class LoggingConsumer {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        props.put("client.id", args[3]);
        props.put("group.protocol", "consumer");
        props.put("group.remote.assignor", "advised");
        props.put("auto.offset.reset", "earliest");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        if (args.length > 4) {
            props.put("group.instance.id", args[4]);
        }
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8));
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        Thread watcher = new Thread(() -> {
            try {
                while (stdin.readLine() != null) { }
            } catch (Exception ignored) { }
            stop.set(true);
        });
        watcher.setDaemon(true);
        watcher.start();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(args[2]));
            out.write("ready\n");
            out.flush();
            while (!stop.get()) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(50));
                long now = System.currentTimeMillis();
                for (ConsumerRecord<byte[], byte[]> record : records) {
                    out.write(now + " " + record.partition() + " " + record.offset() + "\n");
                }
                out.flush();
            }
        }
    }
}
