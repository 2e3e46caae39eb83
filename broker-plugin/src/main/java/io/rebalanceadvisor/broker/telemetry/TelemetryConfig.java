package io.rebalanceadvisor.broker.telemetry;

import io.rebalanceadvisor.broker.BrokerSettings;
import io.rebalanceadvisor.broker.assignor.ListenerBootstrap;
import org.apache.kafka.common.config.ConfigException;

import java.util.Collections;
import java.util.Map;
import java.util.TreeMap;

/**
 * The telemetry receiver's settings, read from the broker's config (keys under
 * {@code rebalance.advisor.telemetry.}; the table is in docs/operations/telemetry.md, "Config keys").
 * A bad value stops the broker's start with a one-line message, as Kafka does for its own keys.
 */
public record TelemetryConfig(
    String topic,
    String bootstrapServers,
    Map<String, Object> producerOverrides,
    String brokerId,
    long flushIntervalMs,
    int queueCapacity,
    int maxPayloadBytes,
    int maxMembers,
    long logIntervalMs,
    long retryBackoffMs,
    String captureDir,
    String subscriptionName,
    long subscriptionIntervalMs
) {
    public static final String PREFIX = "rebalance.advisor.telemetry.";
    public static final String TOPIC = PREFIX + "topic";
    public static final String BOOTSTRAP = PREFIX + "bootstrap.servers";
    public static final String PRODUCER_PREFIX = PREFIX + "producer.";
    public static final String FLUSH_MS = PREFIX + "flush.interval.ms";
    public static final String QUEUE = PREFIX + "queue.capacity";
    public static final String MAX_BYTES = PREFIX + "max.payload.bytes";
    public static final String MAX_MEMBERS = PREFIX + "max.members";
    public static final String LOG_MS = PREFIX + "log.interval.ms";
    public static final String RETRY_MS = PREFIX + "retry.backoff.ms";
    public static final String CAPTURE_DIR = PREFIX + "capture.dir";
    public static final String SUBSCRIPTION_NAME = PREFIX + "subscription.name";
    public static final String SUBSCRIPTION_MS = PREFIX + "subscription.interval.ms";

    public static final String DEFAULT_TOPIC = "_rebalance_advisor_client_telemetry";
    public static final long DEFAULT_FLUSH_MS = 5_000L;
    public static final int DEFAULT_QUEUE = 10_000;
    public static final int DEFAULT_MAX_BYTES = 1_048_576;
    public static final int DEFAULT_MAX_MEMBERS = 100_000;
    public static final long DEFAULT_LOG_MS = 600_000L;
    public static final long DEFAULT_RETRY_MS = 5_000L;
    public static final String DEFAULT_SUBSCRIPTION_NAME = "rebalance-advisor";
    /** KIP-714 caps a subscription's push interval; the advisor wants one at most this long. */
    public static final long MAX_SUBSCRIPTION_MS = 30_000L;

    public TelemetryConfig {
        producerOverrides = Collections.unmodifiableMap(new TreeMap<>(producerOverrides));
    }

    /** The defaults, writing to {@code bootstrapServers} (tests). */
    public static TelemetryConfig defaults(String bootstrapServers) {
        return new TelemetryConfig(DEFAULT_TOPIC, bootstrapServers, Map.of(), "test", DEFAULT_FLUSH_MS,
            DEFAULT_QUEUE, DEFAULT_MAX_BYTES, DEFAULT_MAX_MEMBERS, DEFAULT_LOG_MS, DEFAULT_RETRY_MS, "",
            DEFAULT_SUBSCRIPTION_NAME, 0);
    }

    /** Reads the receiver's keys from the whole broker config that {@code configure()} receives. */
    public static TelemetryConfig from(Map<String, ?> broker) {
        ListenerBootstrap derived = ListenerBootstrap.derive(broker);
        String bootstrap = text(broker, BOOTSTRAP, derived == null ? "" : derived.bootstrapServers()).trim();
        if (bootstrap.isEmpty()) {
            throw new ConfigException(BOOTSTRAP, "", "cannot derive the telemetry writer's bootstrap servers "
                + "from the broker's listeners; set " + BOOTSTRAP + "=host:port");
        }
        Map<String, Object> overrides = new TreeMap<>();
        if (derived != null && !broker.containsKey(BOOTSTRAP)) {
            overrides.put("security.protocol", derived.securityProtocol());
        }
        overrides.putAll(BrokerSettings.prefixed(broker, PRODUCER_PREFIX));
        String topic = text(broker, TOPIC, DEFAULT_TOPIC).trim();
        if (topic.isEmpty()) {
            throw new ConfigException(TOPIC, topic, "the telemetry topic's name must not be empty");
        }
        String brokerId = text(broker, "node.id", text(broker, "broker.id", "unknown")).trim();
        return new TelemetryConfig(topic, bootstrap, overrides, brokerId,
            positive(broker, FLUSH_MS, DEFAULT_FLUSH_MS), (int) bounded(broker, QUEUE, DEFAULT_QUEUE),
            (int) bounded(broker, MAX_BYTES, DEFAULT_MAX_BYTES), (int) bounded(broker, MAX_MEMBERS, DEFAULT_MAX_MEMBERS),
            positive(broker, LOG_MS, DEFAULT_LOG_MS), positive(broker, RETRY_MS, DEFAULT_RETRY_MS),
            text(broker, CAPTURE_DIR, "").trim(), text(broker, SUBSCRIPTION_NAME, DEFAULT_SUBSCRIPTION_NAME).trim(),
            subscriptionInterval(broker));
    }

    /** 0 (the default): the receiver creates no subscription, the operator does. */
    private static long subscriptionInterval(Map<String, ?> broker) {
        if (!broker.containsKey(SUBSCRIPTION_MS)) {
            return 0;
        }
        long value = positive(broker, SUBSCRIPTION_MS, 0);
        if (value < 100 || value > MAX_SUBSCRIPTION_MS) {
            throw new ConfigException(SUBSCRIPTION_MS, value, "must be from 100 to " + MAX_SUBSCRIPTION_MS
                + " ms: capacities are read from samples at most one push interval old");
        }
        return value;
    }

    static String text(Map<String, ?> broker, String key, String fallback) {
        return BrokerSettings.text(broker, key, fallback);
    }

    private static long positive(Map<String, ?> broker, String key, long fallback) {
        return BrokerSettings.positive(broker, key, fallback, "a positive whole number");
    }

    private static long bounded(Map<String, ?> broker, String key, long fallback) {
        long value = positive(broker, key, fallback);
        if (value > Integer.MAX_VALUE) {
            throw new ConfigException(key, value, "must be at most " + Integer.MAX_VALUE);
        }
        return value;
    }
}
