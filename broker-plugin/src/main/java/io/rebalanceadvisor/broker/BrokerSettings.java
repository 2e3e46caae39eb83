package io.rebalanceadvisor.broker;

import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.config.types.Password;

import java.util.Map;
import java.util.TreeMap;

/**
 * Reads the plugin's own keys out of the whole broker config that {@code configure()} receives: one
 * reader for the assignor's and the telemetry receiver's settings, so both parse values alike.
 */
public final class BrokerSettings {
    private BrokerSettings() {
    }

    /** The value of {@code key} as text ({@link Password}s unwrapped), or {@code fallback}. */
    public static String text(Map<String, ?> broker, String key, String fallback) {
        Object value = broker.get(key);
        return value == null ? fallback : String.valueOf(plain(value));
    }

    /** The keys under {@code prefix} with the prefix removed (client settings: SASL, TLS, ...). */
    public static Map<String, Object> prefixed(Map<String, ?> broker, String prefix) {
        Map<String, Object> found = new TreeMap<>();
        for (Map.Entry<String, ?> entry : broker.entrySet()) {
            if (entry.getKey().startsWith(prefix) && entry.getValue() != null) {
                found.put(entry.getKey().substring(prefix.length()), plain(entry.getValue()));
            }
        }
        return found;
    }

    /** A positive whole number; a bad value is refused naming the key, the value and {@code what}. */
    public static long positive(Map<String, ?> broker, String key, long fallback, String what) {
        String value = text(broker, key, Long.toString(fallback)).trim();
        try {
            long parsed = Long.parseLong(value);
            if (parsed > 0) {
                return parsed;
            }
        } catch (NumberFormatException ignored) {
            // reported below with the key and the value
        }
        throw new ConfigException(key, value, "must be " + what);
    }

    private static Object plain(Object value) {
        return value instanceof Password password ? password.value() : value;
    }
}
