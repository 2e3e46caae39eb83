// A Java consumer of a known cost per record (devtools/cost_consumers.py starts it; same spec, same
// behaviour as the Python one there). Run with Java 17's single-file source launcher:
//   java -cp '<kafka libs>/*' CostConsumer.java '{"bootstrap": ..., "cost_s": 0.002, "mode": "inline", ...}'
// Until SIGTERM: subscribe (consumer protocol), process each record for cost_s (slept off in slices,
// owed, never earned while idle), commit what was processed every second, append {"t", "processed"}
// lines to the report file. Mode "pool": a worker pool processes, fetching pauses while it is
// max_queued behind, and only finished offsets (the contiguous prefix) are committed.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.FileWriter;
import java.io.Writer;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class CostConsumer {
    static final double SLICE_S = 0.0;
    static final double CREDIT_S = 0.05;

    /** Simulated processing: owed per record, slept off; an overrun is paid back, but a record
     *  always takes at least half its cost (devtools/cost_consumers.py: Java's idle ratio). */
    static final class Owed {
        final double cost;
        double owed;

        Owed(double cost) {
            this.cost = cost;
        }

        void record() throws InterruptedException {
            owed += cost;
            if (owed > SLICE_S) {
                long start = System.nanoTime();
                Thread.sleep((long) (owed * 1000), (int) ((owed * 1e9) % 1_000_000));
                owed = Math.max(owed - (System.nanoTime() - start) / 1e9, -Math.min(CREDIT_S, cost / 2));
            }
        }
    }

    /** Finished offsets per partition; the committable position is the contiguous prefix. */
    static final class Done {
        final Map<TopicPartition, Long> next = new HashMap<>();
        final Map<TopicPartition, TreeSet<Long>> finished = new HashMap<>();
        long count;

        synchronized void finish(TopicPartition tp, long offset) {
            next.putIfAbsent(tp, offset);
            TreeSet<Long> set = finished.computeIfAbsent(tp, k -> new TreeSet<>());
            set.add(offset);
            while (set.remove(next.get(tp))) {
                next.put(tp, next.get(tp) + 1);
            }
            count++;
        }

        synchronized long takeCount() {
            long c = count;
            count = 0;
            return c;
        }

        synchronized Map<TopicPartition, OffsetAndMetadata> offsets() {
            Map<TopicPartition, OffsetAndMetadata> out = new HashMap<>();
            next.forEach((tp, o) -> out.put(tp, new OffsetAndMetadata(o)));
            return out;
        }
    }

    public static void main(String[] args) throws Exception {
        JsonNode spec = new ObjectMapper().readTree(args[0]);
        double cost = spec.get("cost_s").asDouble();
        boolean pool = spec.get("mode").asText().equals("pool");
        Properties props = new Properties();
        props.put("bootstrap.servers", spec.get("bootstrap").asText());
        props.put("group.id", spec.get("group").asText());
        props.put("client.id", spec.get("client_id").asText());
        props.put("group.protocol", "consumer");
        props.put("auto.offset.reset", spec.path("offset_reset").asText("earliest"));
        props.put("enable.auto.commit", "false");
        if (!spec.path("instance_id").asText("").isEmpty()) {
            props.put("group.instance.id", spec.get("instance_id").asText());
        }
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
        Thread main = Thread.currentThread();
                Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            STOP.set(true);
            consumer.wakeup();
            try {
                main.join(10_000);
            } catch (InterruptedException ignored) {
                // exiting anyway
            }
        }));
        Done done = new Done();
        BlockingQueue<ConsumerRecord<byte[], byte[]>> work = new ArrayBlockingQueue<>(1_000_000);
        if (pool) {
            for (int i = 0; i < spec.get("workers").asInt(); i++) {
                Thread worker = new Thread(() -> work(cost, work, done));
                worker.setDaemon(true);
                worker.start();
            }
        }
        int maxQueued = spec.get("max_queued").asInt();
        String report = spec.path("report").asText("");
        Owed owed = new Owed(cost);
        boolean paused = false;
        long inPollNs = 0;
        long polls = 0;
        long nextCommit = System.currentTimeMillis() + 1000;
        long nextReport = nextCommit;
        consumer.subscribe(List.of(spec.get("topic").asText()));
        try (Writer out = report.isEmpty() ? Writer.nullWriter() : new FileWriter(report, true)) {
            while (!STOP.get()) {
                long pollStart = System.nanoTime();
                var records = consumer.poll(Duration.ofMillis(100));
                inPollNs += System.nanoTime() - pollStart;
                polls++;
                for (ConsumerRecord<byte[], byte[]> record : records) {
                    if (pool) {
                        work.put(record);
                    } else {
                        owed.record();
                        done.finish(new TopicPartition(record.topic(), record.partition()), record.offset());
                    }
                }
                if (pool && (work.size() > maxQueued) != paused) {
                    paused = !paused;
                    if (paused) {
                        consumer.pause(consumer.assignment());
                    } else {
                        consumer.resume(consumer.assignment());
                    }
                }
                long now = System.currentTimeMillis();
                if (now >= nextCommit) {
                    consumer.commitAsync(done.offsets(), null);
                    nextCommit = now + 1000;
                }
                if (now >= nextReport) {
                    out.write("{\"t\": " + now / 1000.0 + ", \"processed\": " + done.takeCount()
                        + ", \"poll_idle_ratio_avg\": " + metric(consumer, "poll-idle-ratio-avg")
                        + ", \"time_between_poll_avg\": " + metric(consumer, "time-between-poll-avg")
                        + ", \"polls\": " + polls + ", \"in_poll_s\": " + inPollNs / 1e9 + "}\n");
                    polls = 0;
                    inPollNs = 0;
                    out.flush();
                    nextReport = now + 1000;
                }
            }
        } catch (WakeupException stopping) {
            // SIGTERM
        } finally {
            consumer.close(org.apache.kafka.clients.consumer.CloseOptions.timeout(Duration.ofSeconds(5)));
        }
    }

    static final java.util.concurrent.atomic.AtomicBoolean STOP = new java.util.concurrent.atomic.AtomicBoolean();

    /** The consumer's own value of one of its consumer-metrics (what its telemetry pushes), or -1. */
    static double metric(KafkaConsumer<byte[], byte[]> consumer, String name) {
        for (var entry : consumer.metrics().entrySet()) {
            if (entry.getKey().name().equals(name) && entry.getKey().group().equals("consumer-metrics")) {
                Object value = entry.getValue().metricValue();
                return value instanceof Double d && Double.isFinite(d) ? d : -1;
            }
        }
        return -1;
    }

    static void work(double cost, BlockingQueue<ConsumerRecord<byte[], byte[]>> work, Done done) {
        Owed owed = new Owed(cost);
        try {
            while (true) {
                ConsumerRecord<byte[], byte[]> record = work.poll(200, TimeUnit.MILLISECONDS);
                if (record != null) {
                    owed.record();
                    done.finish(new TopicPartition(record.topic(), record.partition()), record.offset());
                }
            }
        } catch (InterruptedException stopping) {
            // the JVM exits
        }
    }
}
