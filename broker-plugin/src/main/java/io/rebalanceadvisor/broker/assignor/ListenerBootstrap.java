package io.rebalanceadvisor.broker.assignor;

import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The plan reader's default bootstrap address: the broker's own inter-broker listener (else its first
 * client listener), as advertised. Credentials are never borrowed from the broker: they come from
 * {@code rebalance.advisor.plans.consumer.*} (docs/operations/broker-plugin.md, "Security").
 */
record ListenerBootstrap(String bootstrapServers, String securityProtocol) {

    /** Null when the broker config names no usable listener. */
    static ListenerBootstrap derive(Map<String, ?> broker) {
        Map<String, String> advertised = listeners(AdvisedConfig.text(broker, "advertised.listeners", ""));
        Map<String, String> bound = listeners(AdvisedConfig.text(broker, "listeners", ""));
        List<String> controllers = names(AdvisedConfig.text(broker, "controller.listener.names", ""));
        String wanted = AdvisedConfig.text(broker, "inter.broker.listener.name", "").trim().toUpperCase(Locale.ROOT);
        String chosen = bound.containsKey(wanted) ? wanted : null;
        for (String name : bound.keySet()) {
            if (chosen == null && !controllers.contains(name)) {
                chosen = name;
            }
        }
        if (chosen == null) {
            return null;
        }
        String address = advertised.getOrDefault(chosen, bound.get(chosen));
        String protocols = AdvisedConfig.text(broker, "listener.security.protocol.map", "");
        return new ListenerBootstrap(reachable(address), protocolOf(chosen, protocols));
    }

    /** {@code NAME://host:port,...} as NAME → host:port, in order. */
    static Map<String, String> listeners(String text) {
        Map<String, String> parsed = new LinkedHashMap<>();
        for (String listener : text.split(",")) {
            int scheme = listener.indexOf("://");
            if (scheme > 0) {
                parsed.put(listener.substring(0, scheme).trim().toUpperCase(Locale.ROOT),
                    listener.substring(scheme + 3).trim());
            }
        }
        return parsed;
    }

    private static List<String> names(String text) {
        return Arrays.stream(text.split(",")).map(s -> s.trim().toUpperCase(Locale.ROOT)).toList();
    }

    /** A wildcard or empty bind host is reached on loopback from inside the broker's own process. */
    private static String reachable(String address) {
        int colon = address.lastIndexOf(':');
        String host = colon < 0 ? address : address.substring(0, colon);
        if (host.isEmpty() || host.equals("0.0.0.0") || host.equals("[::]")) {
            return "127.0.0.1" + address.substring(Math.max(colon, 0));
        }
        return address;
    }

    private static String protocolOf(String listener, String protocolMap) {
        for (String pair : protocolMap.split(",")) {
            String[] parts = pair.split(":");
            if (parts.length == 2 && parts[0].trim().equalsIgnoreCase(listener)) {
                return parts[1].trim().toUpperCase(Locale.ROOT);
            }
        }
        return listener;  // without a map, Kafka names listeners after their protocol
    }
}
