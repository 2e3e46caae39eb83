// Run J of bench/closed_loop.py: a plain Java subscribe() consumer of fixed capacity, no helper.
//
//   java -cp '<kafka jars>/*' ClosedLoopConsumer.java BOOTSTRAP GROUP TOPIC MEMBER CAPACITY REPORT_FILE
//
// Consumer protocol (KIP-848) with group.remote.assignor=advised, auto-commit every second. Each
// record costs 1/CAPACITY s of simulated processing, slept off outside poll() record by record; an
// overrun sleep is paid back up to 0.05 s, a record taking at least half its cost (the Python consumer's schedule and devtools/CostConsumer's,
// which client telemetry is calibrated for: docs/benchmarks/telemetry-accuracy.md). Every 5 s it appends one JSON line to
// REPORT_FILE, the Python consumer's format: {"t", "member", "owned", "processed", "lat"}. Stops on
// SIGTERM (a shutdown hook wakes the consumer and waits for its close).
import java.io.FileWriter;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ClosedLoopConsumer {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        props.put("client.id", args[3]);
        props.put("group.protocol", "consumer");
        props.put("group.remote.assignor", "advised");
        props.put("enable.auto.commit", "true");
        props.put("auto.commit.interval.ms", "1000");
        props.put("auto.offset.reset", "earliest");
        props.put("max.poll.records", "50");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        double perRecord = 1.0 / Double.parseDouble(args[4]);
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            consumer.wakeup();
            try {
                closed.await();
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
        }));
        try (PrintWriter out = new PrintWriter(new FileWriter(args[5], true))) {
            consumer.subscribe(List.of(args[2]));
            double owed = 0.0;
            List<Double> latencies = new ArrayList<>();
            long processed = 0;
            double nextReport = now();
            while (true) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(100))) {
                    double start = now();
                    latencies.add(Math.round((start - record.timestamp() / 1000.0) * 1000.0) / 1000.0);
                    processed++;
                    owed += perRecord;
                    if (owed > 0.0) {
                        Thread.sleep((long) (owed * 1000), (int) ((owed * 1e9) % 1_000_000));
                        owed = Math.max(owed - (now() - start), -Math.min(0.05, perRecord / 2));
                    }
                }
                if (now() >= nextReport) {
                    TreeSet<Integer> owned = new TreeSet<>();
                    for (TopicPartition tp : consumer.assignment()) {
                        owned.add(tp.partition());
                    }
                    out.println("{\"t\": " + now() + ", \"member\": \"" + args[3] + "\", \"owned\": " + owned
                            + ", \"processed\": " + processed + ", \"lat\": " + latencies + "}");
                    out.flush();
                    latencies.clear();
                    processed = 0;
                    nextReport = now() + 5.0;
                }
            }
        } catch (WakeupException stopping) {
            // SIGTERM: close below
        } finally {
            consumer.close();
            closed.countDown();
        }
    }

    private static double now() {
        return System.currentTimeMillis() / 1000.0;
    }
}
