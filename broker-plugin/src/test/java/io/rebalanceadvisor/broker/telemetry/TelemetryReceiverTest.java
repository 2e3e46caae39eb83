package io.rebalanceadvisor.broker.telemetry;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.server.authorizer.AuthorizableRequestContext;
import org.apache.kafka.server.telemetry.ClientTelemetryContext;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The request-thread side: it never throws, never waits, and counts what it drops. */
class TelemetryReceiverTest {

    static Map<String, Object> broker(String topic) {
        Map<String, Object> config = new HashMap<>();
        config.put("listeners", "PLAINTEXT://127.0.0.1:1");  // nothing listens: the writer only retries
        config.put("node.id", "1");
        config.put(TelemetryConfig.TOPIC, topic);
        config.put(TelemetryConfig.QUEUE, "3");
        config.put(TelemetryConfig.MAX_BYTES, "100");
        config.put(TelemetryConfig.FLUSH_MS, "3600000");
        return config;
    }

    static ClientTelemetryContext context(AuthorizableRequestContext request) {
        return new ClientTelemetryContext() {
            public int pushIntervalMs() {
                return 5000;
            }

            public AuthorizableRequestContext authorizableRequestContext() {
                return request;
            }
        };
    }

    static ClientTelemetryPayload payload(ByteBuffer data) {
        return new ClientTelemetryPayload() {
            public Uuid clientInstanceId() {
                return null;
            }

            public boolean isTerminating() {
                return false;
            }

            public String contentType() {
                return null;
            }

            public ByteBuffer data() {
                return data;
            }
        };
    }

    @Test
    void dropsAreCountedAndNothingIsThrown() {
        TelemetryReceiver receiver = new TelemetryReceiver();
        receiver.configure(broker("t-" + System.nanoTime()));
        TelemetryWriter writer = TelemetryWriter.shared(TelemetryConfig.from(broker("unused")));
        try {
            receiver.exportMetrics(context(null), payload(null));
            receiver.exportMetrics(context(null), payload(ByteBuffer.allocate(101)));
            receiver.exportMetrics(null, payload(ByteBuffer.allocate(10)));  // a broken context
            Map<String, Long> counts = receiverCounters(receiver);
            assertEquals(3, counts.get("pushes"));
            assertEquals(2, counts.get("dropped_too_big"), "no data, and one byte over the limit");
            assertEquals(1, counts.get("callback_errors"));
            assertTrue(writer != null);
        } finally {
            receiver.close();
        }
    }

    @Test
    void aFullQueueDropsWithoutWaiting() {
        TelemetryWriter writer = new TelemetryWriter(TelemetryConfig.from(broker("q")));
        // the thread is started by the first offer; with a paused writer the queue of 3 fills
        Push push = PushDecoderTest.push(new byte[] {1});
        long start = System.nanoTime();
        for (int i = 0; i < 1_000; i++) {
            writer.offer(push);
        }
        writer.close();
        assertTrue(writer.counters().snapshot().get("dropped_queue_full") > 0);
        assertTrue(System.nanoTime() - start < 5_000_000_000L, "offer never waits");
    }

    @Test
    void badSettingsStopTheBrokerWithTheKey() {
        Map<String, Object> config = broker("t");
        config.put(TelemetryConfig.SUBSCRIPTION_MS, "60000");
        ConfigException error = assertThrows(ConfigException.class, () -> TelemetryConfig.from(config));
        assertTrue(error.getMessage().contains(TelemetryConfig.SUBSCRIPTION_MS));
        config.put(TelemetryConfig.SUBSCRIPTION_MS, "10000");
        assertEquals(10_000, TelemetryConfig.from(config).subscriptionIntervalMs());
        config.put(TelemetryConfig.QUEUE, "-1");
        assertThrows(ConfigException.class, () -> TelemetryConfig.from(config));
    }

    static Map<String, Long> receiverCounters(TelemetryReceiver receiver) {
        return receiver.counters().snapshot();
    }
}
