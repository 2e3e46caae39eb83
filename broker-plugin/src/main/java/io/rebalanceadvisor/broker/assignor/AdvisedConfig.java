package io.rebalanceadvisor.broker.assignor;

import io.rebalanceadvisor.broker.BrokerSettings;
import org.apache.kafka.common.config.ConfigException;

import java.util.Collections;
import java.util.Map;
import java.util.TreeMap;

/**
 * The plugin's settings, read from the broker's own config (keys under {@code rebalance.advisor.};
 * the table is in docs/operations/broker-plugin.md, "Config keys"). A bad value stops the broker's
 * start (and its storage-format step) with a one-line message, as Kafka does for its own keys.
 */
public record AdvisedConfig(
    String name,
    String plansTopic,
    String bootstrapServers,
    Map<String, Object> consumerOverrides,
    long maxPlanAgeMs,
    double minPresentFraction,
    long logIntervalMs,
    long retryBackoffMs
) {
    public static final String PREFIX = "rebalance.advisor.";
    public static final String NAME = PREFIX + "assignor.name";
    public static final String PLANS_TOPIC = PREFIX + "plans.topic";
    public static final String BOOTSTRAP = PREFIX + "plans.bootstrap.servers";
    public static final String CONSUMER_PREFIX = PREFIX + "plans.consumer.";
    public static final String MAX_AGE_MS = PREFIX + "plan.max.age.ms";
    public static final String MIN_PRESENT = PREFIX + "plan.min.members.present.fraction";
    public static final String LOG_INTERVAL_MS = PREFIX + "log.interval.ms";
    public static final String RETRY_BACKOFF_MS = PREFIX + "plans.retry.backoff.ms";

    public static final String DEFAULT_NAME = "advised";
    public static final String DEFAULT_PLANS_TOPIC = "_rebalance_advisor_broker_plans";
    public static final long DEFAULT_MAX_AGE_MS = 3_600_000L;
    public static final double DEFAULT_MIN_PRESENT = 0.5;
    public static final long DEFAULT_LOG_INTERVAL_MS = 600_000L;
    public static final long DEFAULT_RETRY_BACKOFF_MS = 5_000L;

    public AdvisedConfig {
        consumerOverrides = Collections.unmodifiableMap(new TreeMap<>(consumerOverrides));
    }

    /** The defaults, with the reader pointed at {@code bootstrapServers} (tests, benches). */
    public static AdvisedConfig defaults(String bootstrapServers) {
        return new AdvisedConfig(DEFAULT_NAME, DEFAULT_PLANS_TOPIC, bootstrapServers, Map.of(),
            DEFAULT_MAX_AGE_MS, DEFAULT_MIN_PRESENT, DEFAULT_LOG_INTERVAL_MS, DEFAULT_RETRY_BACKOFF_MS);
    }

    /** Reads the plugin's keys from the whole broker config that {@code configure()} receives. */
    public static AdvisedConfig from(Map<String, ?> broker) {
        String name = text(broker, NAME, DEFAULT_NAME);
        if (name.isBlank()) {
            throw new ConfigException(NAME, name, "the assignor's name must not be empty");
        }
        double fraction = decimal(broker, MIN_PRESENT, DEFAULT_MIN_PRESENT);
        if (fraction < 0 || fraction >= 1) {
            throw new ConfigException(MIN_PRESENT, fraction, "must be at least 0 and below 1");
        }
        ListenerBootstrap derived = ListenerBootstrap.derive(broker);
        String bootstrap = text(broker, BOOTSTRAP, derived == null ? "" : derived.bootstrapServers());
        if (bootstrap.isBlank()) {
            throw new ConfigException(BOOTSTRAP, "", "cannot derive the plan reader's bootstrap servers from "
                + "the broker's listeners; set " + BOOTSTRAP + "=host:port");
        }
        Map<String, Object> overrides = new TreeMap<>();
        if (derived != null && !broker.containsKey(BOOTSTRAP)) {
            overrides.put("security.protocol", derived.securityProtocol());
        }
        overrides.putAll(consumerOverrides(broker));
        return new AdvisedConfig(name.trim(), text(broker, PLANS_TOPIC, DEFAULT_PLANS_TOPIC), bootstrap.trim(),
            overrides, positive(broker, MAX_AGE_MS, DEFAULT_MAX_AGE_MS), fraction,
            positive(broker, LOG_INTERVAL_MS, DEFAULT_LOG_INTERVAL_MS),
            positive(broker, RETRY_BACKOFF_MS, DEFAULT_RETRY_BACKOFF_MS));
    }

    /** The {@code rebalance.advisor.plans.consumer.*} keys with the prefix removed (SASL, TLS, ...). */
    static Map<String, Object> consumerOverrides(Map<String, ?> broker) {
        return BrokerSettings.prefixed(broker, CONSUMER_PREFIX);
    }

    static String text(Map<String, ?> broker, String key, String fallback) {
        return BrokerSettings.text(broker, key, fallback);
    }

    private static long positive(Map<String, ?> broker, String key, long fallback) {
        return BrokerSettings.positive(broker, key, fallback, "a positive whole number of milliseconds");
    }

    private static double decimal(Map<String, ?> broker, String key, double fallback) {
        String value = text(broker, key, Double.toString(fallback)).trim();
        try {
            return Double.parseDouble(value);
        } catch (NumberFormatException error) {
            throw new ConfigException(key, value, "must be a decimal number such as 0.5");
        }
    }
}
