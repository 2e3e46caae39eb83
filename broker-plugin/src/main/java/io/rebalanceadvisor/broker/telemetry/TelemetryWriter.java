package io.rebalanceadvisor.broker.telemetry;

import io.rebalanceadvisor.broker.assignor.Notes;
import io.rebalanceadvisor.broker.assignor.RateLimitedLog;
import io.rebalanceadvisor.broker.telemetry.MemberSample.MemberKey;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * The receiver's one background thread: takes pushes from a bounded queue (request threads only
 * ever {@link #offer} and never wait), decodes them, keeps the newest sample per member and writes
 * the changes to the compacted telemetry topic at most once per flush interval. Topic missing or
 * unwritable: samples stay in memory, one log line per cause and interval, retried.
 */
public final class TelemetryWriter {

    private static final Logger LOG = LoggerFactory.getLogger(TelemetryWriter.class);
    private static final Map<List<Object>, TelemetryWriter> SHARED = new ConcurrentHashMap<>();

    private final TelemetryConfig config;
    private final TelemetryCounters counters = new TelemetryCounters();
    private final BlockingQueue<Push> inbox;
    private final SampleTable table;
    private final Notes notes;
    private final PushCapture capture;
    private volatile Thread thread;
    private volatile boolean closed;
    private KafkaProducer<byte[], byte[]> producer;
    private boolean topicReady;
    private boolean subscribed;
    private long nextLogMs;

    TelemetryWriter(TelemetryConfig config) {
        this.config = config;
        this.inbox = new ArrayBlockingQueue<>(config.queueCapacity());
        this.table = new SampleTable(config.maxMembers());
        this.notes = new RateLimitedLog(LOG, config.logIntervalMs(), System::currentTimeMillis);
        this.capture = PushCapture.at(config.captureDir());
    }

    /** Starts the thread now when it must create the subscription (no push comes before it). */
    void startIfSubscribing() {
        if (config.subscriptionIntervalMs() > 0) {
            start();
        }
    }

    /** One writer per distinct settings in this JVM (a combined node may make several reporters). */
    static TelemetryWriter shared(TelemetryConfig config) {
        return SHARED.computeIfAbsent(List.of(config.topic(), config.bootstrapServers(), config.producerOverrides()),
            k -> new TelemetryWriter(config));
    }

    public TelemetryCounters counters() {
        return counters;
    }

    /** Pushes larger than this are dropped on the request thread, before any copy. */
    public int maxPayloadBytes() {
        return config.maxPayloadBytes();
    }

    /** Request threads: hands a push over without waiting; a full queue drops it (counted). */
    public void offer(Push push) {
        if (thread == null) {
            start();
        }
        if (!inbox.offer(push)) {
            counters.queueFull.incrementAndGet();
        }
    }

    private synchronized void start() {
        if (thread != null || closed) {
            return;
        }
        Thread writer = new Thread(this::run, "rebalance-advisor-telemetry-writer");
        writer.setDaemon(true);
        writer.start();
        thread = writer;
    }

    /** Stops the thread (the reporter's close(); tests). */
    public void close() {
        closed = true;
        Thread writer = thread;
        if (writer != null) {
            writer.interrupt();
        }
    }

    private void run() {
        long nextFlush = System.currentTimeMillis() + config.flushIntervalMs();
        nextLogMs = System.currentTimeMillis() + config.logIntervalMs();
        while (!closed) {
            try {
                long wait = Math.max(nextFlush - System.currentTimeMillis(), 1);
                Push push = inbox.poll(wait, TimeUnit.MILLISECONDS);
                if (push != null) {
                    take(push);
                }
                if (System.currentTimeMillis() >= nextFlush) {
                    subscribe();
                    flush(System.currentTimeMillis());
                    nextFlush = System.currentTimeMillis() + config.flushIntervalMs();
                }
            } catch (InterruptedException interrupted) {
                break;
            } catch (Exception | LinkageError error) {
                notes.note("writer:" + error.getClass().getName(), "telemetry writer: " + error
                    + "; samples kept in memory, retrying every " + config.retryBackoffMs() + " ms");
                dropProducer();
                pause(config.retryBackoffMs());
            }
        }
        dropProducer();
    }

    /** Decodes one push into the table. */
    void take(Push push) {
        capture.keep(push);
        PushDecoder.Decoded decoded = PushDecoder.decode(push);
        counters.count(decoded);
        MemberSample sample = decoded.sample();
        if (sample == null) {
            return;
        }
        if (push.terminating()) {
            table.forget(sample.key());
        } else if (!table.put(sample)) {
            counters.tableFull.incrementAndGet();
        }
    }

    /** Writes what changed; on failure puts it back for the next flush. */
    void flush(long nowMs) throws InterruptedException {
        table.expire(nowMs);
        List<MemberSample> changed = table.takeChanged();
        List<MemberKey> removed = table.takeRemoved();
        boolean logDue = nowMs >= nextLogMs;
        if (changed.isEmpty() && removed.isEmpty() && !logDue) {
            return;
        }
        try {
            write(changed, removed, nowMs);
        } catch (ExecutionException | RuntimeException failed) {
            counters.writeErrors.incrementAndGet();
            table.retry(changed, removed);
            notes.note("write:" + failed.getClass().getName(), "cannot write client telemetry to " + config.topic()
                + " at " + config.bootstrapServers() + " (" + failed + "); kept in memory, retrying");
            dropProducer();
            return;
        }
        if (logDue) {
            LOG.info("client telemetry: {} member(s) held; counters {}", table.size(), counters.snapshot());
            nextLogMs = nowMs + config.logIntervalMs();
        }
    }

    private void write(List<MemberSample> changed, List<MemberKey> removed, long nowMs)
        throws ExecutionException, InterruptedException {
        KafkaProducer<byte[], byte[]> out = producer();
        List<java.util.concurrent.Future<?>> sent = new ArrayList<>();
        for (MemberSample sample : changed) {
            sent.add(out.send(new ProducerRecord<>(config.topic(), SampleRecords.key(sample.key()),
                SampleRecords.value(sample, config.brokerId()))));
        }
        for (MemberKey key : removed) {
            sent.add(out.send(new ProducerRecord<>(config.topic(), SampleRecords.key(key), null)));
        }
        sent.add(out.send(new ProducerRecord<>(config.topic(), SampleRecords.countersKey(config.brokerId()),
            SampleRecords.counters(counters.snapshot(), nowMs))));
        for (java.util.concurrent.Future<?> future : sent) {
            future.get();
        }
        counters.written.addAndGet(changed.size() + removed.size());
    }

    private KafkaProducer<byte[], byte[]> producer() throws ExecutionException, InterruptedException {
        if (!topicReady) {
            createTopic();
            topicReady = true;
        }
        if (producer == null) {
            producer = new KafkaProducer<>(producerProperties());
        }
        return producer;
    }

    /** With a subscription interval set: the client-metrics subscription, set once per start. */
    private void subscribe() throws InterruptedException {
        if (subscribed || config.subscriptionIntervalMs() <= 0) {
            return;
        }
        ConfigResource resource = new ConfigResource(ConfigResource.Type.CLIENT_METRICS, config.subscriptionName());
        List<AlterConfigOp> ops = List.of(
            new AlterConfigOp(new ConfigEntry("metrics", String.join(",", PushDecoder.SUBSCRIBED)),
                AlterConfigOp.OpType.SET),
            new AlterConfigOp(new ConfigEntry("interval.ms", Long.toString(config.subscriptionIntervalMs())),
                AlterConfigOp.OpType.SET));
        try (Admin admin = Admin.create(adminProperties())) {
            admin.incrementalAlterConfigs(Map.of(resource, ops)).all().get(30, TimeUnit.SECONDS);
        } catch (ExecutionException | java.util.concurrent.TimeoutException | RuntimeException failed) {
            notes.note("subscribe:" + failed.getClass().getName(), "cannot set the client-metrics subscription "
                + config.subscriptionName() + " (" + failed + "); clients push nothing until it exists; retrying");
            return;
        }
        subscribed = true;
        LOG.info("client-metrics subscription {}: {} every {} ms", config.subscriptionName(), PushDecoder.SUBSCRIBED,
            config.subscriptionIntervalMs());
    }

    private Properties adminProperties() {
        Properties properties = new Properties();
        properties.putAll(config.producerOverrides());
        properties.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, config.bootstrapServers());
        properties.put(AdminClientConfig.CLIENT_ID_CONFIG, "rebalance-advisor-telemetry-admin");
        return properties;
    }

    /** The compacted topic, with the cluster's default partitions and replication, if missing. */
    private void createTopic() throws ExecutionException, InterruptedException {
        try (Admin admin = Admin.create(adminProperties())) {
            NewTopic topic = new NewTopic(config.topic(), Optional.empty(), Optional.empty())
                .configs(Map.of("cleanup.policy", "compact"));
            admin.createTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
            LOG.info("created the client telemetry topic {}", config.topic());
        } catch (ExecutionException failed) {
            if (!(failed.getCause() instanceof TopicExistsException)) {
                throw failed;
            }
        } catch (java.util.concurrent.TimeoutException slow) {
            throw new ExecutionException(slow);
        }
    }

    private Properties producerProperties() {
        Properties properties = new Properties();
        properties.put(ProducerConfig.CLIENT_ID_CONFIG, "rebalance-advisor-telemetry-writer");
        properties.put(ProducerConfig.LINGER_MS_CONFIG, "20");
        properties.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        properties.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        properties.put(ProducerConfig.RECONNECT_BACKOFF_MS_CONFIG, "1000");
        properties.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "30000");
        properties.putAll(config.producerOverrides());
        properties.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, config.bootstrapServers());
        properties.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        properties.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return properties;
    }

    private void dropProducer() {
        if (producer != null) {
            try {
                producer.close(java.time.Duration.ofSeconds(5));
            } catch (RuntimeException ignored) {
                // closing a broken producer: nothing left to save
            }
            producer = null;
        }
        topicReady = false;
    }

    private void pause(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
        }
    }
}
