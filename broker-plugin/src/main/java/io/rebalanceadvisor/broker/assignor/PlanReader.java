package io.rebalanceadvisor.broker.assignor;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Keeps the plans topic in memory on a daemon thread of its own, so assign() (on the group
 * coordinator's thread) only reads {@link #current()}. It reads every partition from the beginning
 * (so a broker restart re-reads the plans), swaps in a new index once caught up, then follows.
 * Topic missing or unreadable: the index stays as it was (empty at start: uniform), one log line,
 * and the reader retries in the background.
 */
public final class PlanReader {

    private static final Logger LOG = LoggerFactory.getLogger(PlanReader.class);
    private static final Map<List<Object>, PlanReader> SHARED = new ConcurrentHashMap<>();
    private static final Duration POLL = Duration.ofMillis(500);
    private static final long TOPIC_CHECK_MS = 30_000L;

    private final AdvisedConfig config;
    private final Notes notes;
    private volatile PlanIndex index = PlanIndex.EMPTY;
    private volatile boolean caughtUp;
    private volatile Thread thread;
    private volatile boolean closed;

    PlanReader(AdvisedConfig config, Notes notes) {
        this.config = config;
        this.notes = notes;
    }

    /** The one reader per distinct reader settings in this JVM (the broker makes several assignors). */
    static PlanReader shared(AdvisedConfig config) {
        List<Object> key = List.of(config.bootstrapServers(), config.plansTopic(), config.consumerOverrides(),
            config.retryBackoffMs());
        return SHARED.computeIfAbsent(key, k -> new PlanReader(config,
            new RateLimitedLog(LOG, config.logIntervalMs(), System::currentTimeMillis)));
    }

    /** The plans in force now; starts the reader on first use (never in configure()). */
    public PlanIndex current() {
        if (thread == null) {
            start();
        }
        return index;
    }

    /** True once the reader has read the topic to its end at least once. */
    public boolean caughtUp() {
        return caughtUp;
    }

    private synchronized void start() {
        if (thread != null || closed) {
            return;
        }
        Thread reader = new Thread(this::run, "rebalance-advisor-plan-reader");
        reader.setDaemon(true);
        reader.start();
        thread = reader;
    }

    /** Stops the thread (tests; a broker simply exits). */
    public void close() {
        closed = true;
        Thread reader = thread;
        if (reader != null) {
            reader.interrupt();
        }
    }

    private void run() {
        while (!closed) {
            try {
                readUntilTopicChanges();
            } catch (org.apache.kafka.common.errors.InterruptException | org.apache.kafka.common.errors.WakeupException e) {
                if (closed) {
                    return;
                }
            } catch (Exception | LinkageError error) {
                notes.note("reader:" + error.getClass().getName(), "cannot read the plans topic " + config.plansTopic()
                    + " from " + config.bootstrapServers() + " (" + error + "); groups keep the plans read so far "
                    + "(none at start: uniform); retrying every " + config.retryBackoffMs() + " ms");
            }
            sleep(config.retryBackoffMs());
        }
    }

    /** One consumer's life: from the beginning to the end, then following; returns when the topic changes. */
    private void readUntilTopicChanges() {
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProperties())) {
            List<TopicPartition> partitions = partitions(consumer);
            if (partitions.isEmpty()) {
                notes.note("missing:" + config.plansTopic(), "the plans topic " + config.plansTopic()
                    + " does not exist (yet): every group gets uniform's assignment; retrying every "
                    + config.retryBackoffMs() + " ms");
                index = PlanIndex.EMPTY;
                return;
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> end = consumer.endOffsets(partitions, Duration.ofSeconds(30));
            Map<String, Plan> plans = new HashMap<>();
            boolean published = false;
            long nextTopicCheck = System.currentTimeMillis() + TOPIC_CHECK_MS;
            while (!closed) {
                boolean changed = false;
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(POLL)) {
                    changed |= take(record, plans);
                }
                if (!published && reached(consumer, end)) {
                    published = true;
                    changed = true;
                    LOG.info("read the plans topic {} to its end: {} plan(s)", config.plansTopic(), plans.size());
                }
                if (published && changed) {
                    index = PlanIndex.of(plans.values());
                    caughtUp = true;
                }
                if (System.currentTimeMillis() >= nextTopicCheck) {
                    if (!partitions(consumer).equals(partitions)) {
                        return;  // partitions added or topic deleted: read it again from the beginning
                    }
                    nextTopicCheck = System.currentTimeMillis() + TOPIC_CHECK_MS;
                }
            }
        }
    }

    /** Applies one record to the plans by group; true when the plans changed. */
    private boolean take(ConsumerRecord<byte[], byte[]> record, Map<String, Plan> plans) {
        if (record.key() == null) {
            notes.note("nokey:" + record.partition() + ":" + record.offset(), "the plans topic has a record "
                + "without a key (partition " + record.partition() + ", offset " + record.offset() + "): ignored");
            return false;
        }
        String group = new String(record.key(), StandardCharsets.UTF_8);
        PlanRecordParser.Parsed parsed = PlanRecordParser.parse(group, record.value());
        if (parsed.problem() != null) {
            notes.note("record:" + group + ":" + record.offset(), parsed.problem());
        }
        if (parsed.plan() == null) {
            return plans.remove(group) != null;
        }
        plans.put(group, parsed.plan());
        return true;
    }

    private List<TopicPartition> partitions(KafkaConsumer<byte[], byte[]> consumer) {
        List<PartitionInfo> infos = consumer.partitionsFor(config.plansTopic(), Duration.ofSeconds(30));
        if (infos == null) {
            return List.of();
        }
        return infos.stream().map(info -> new TopicPartition(info.topic(), info.partition()))
            .sorted(java.util.Comparator.comparingInt(TopicPartition::partition)).toList();
    }

    private static boolean reached(KafkaConsumer<byte[], byte[]> consumer, Map<TopicPartition, Long> end) {
        for (Map.Entry<TopicPartition, Long> entry : end.entrySet()) {
            if (consumer.position(entry.getKey(), Duration.ofSeconds(30)) < entry.getValue()) {
                return false;
            }
        }
        return true;
    }

    private Properties consumerProperties() {
        Properties properties = new Properties();
        properties.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, config.bootstrapServers());
        properties.put(ConsumerConfig.CLIENT_ID_CONFIG, "rebalance-advisor-plan-reader");
        properties.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        properties.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        properties.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        // the client logs each failed connection: slow its retries so an unreachable listener does
        // not fill the broker's log (our own lines are rate-limited by RateLimitedLog)
        properties.put(ConsumerConfig.RECONNECT_BACKOFF_MS_CONFIG, "1000");
        properties.put(ConsumerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "30000");
        properties.putAll(config.consumerOverrides());
        properties.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        properties.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return properties;
    }

    private void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException interrupted) {
            // only close() interrupts this thread, and it sets `closed` first: the loop ends
        }
    }
}
