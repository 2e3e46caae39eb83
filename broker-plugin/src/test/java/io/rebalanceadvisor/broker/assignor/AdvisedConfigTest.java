package io.rebalanceadvisor.broker.assignor;

import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.config.types.Password;
import org.junit.jupiter.api.Test;

import java.util.HashMap;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class AdvisedConfigTest {

    @Test
    void defaultsWithTheBootstrapDerivedFromTheBrokersListener() {
        AdvisedConfig config = AdvisedConfig.from(Map.of(
            "listeners", "PLAINTEXT://:9092,CONTROLLER://127.0.0.1:9093",
            "controller.listener.names", "CONTROLLER"));
        assertEquals("advised", config.name());
        assertEquals("_rebalance_advisor_broker_plans", config.plansTopic());
        assertEquals("127.0.0.1:9092", config.bootstrapServers());
        assertEquals("PLAINTEXT", config.consumerOverrides().get("security.protocol"));
        assertEquals(3_600_000L, config.maxPlanAgeMs());
        assertEquals(0.5, config.minPresentFraction());
    }

    @Test
    void theInterBrokerListenerIsPreferredAsAdvertised() {
        AdvisedConfig config = AdvisedConfig.from(Map.of(
            "listeners", "CLIENT://0.0.0.0:9092,INTERNAL://0.0.0.0:19092,CONTROLLER://0.0.0.0:9093",
            "advertised.listeners", "CLIENT://kafka-1.example:9092,INTERNAL://kafka-1:19092",
            "inter.broker.listener.name", "INTERNAL",
            "controller.listener.names", "CONTROLLER",
            "listener.security.protocol.map", "CLIENT:SASL_SSL,INTERNAL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"));
        assertEquals("kafka-1:19092", config.bootstrapServers());
        assertEquals("SASL_PLAINTEXT", config.consumerOverrides().get("security.protocol"));
    }

    @Test
    void ownKeysAndConsumerSettingsPassThrough() {
        Map<String, Object> broker = new HashMap<>();
        broker.put("listeners", "PLAINTEXT://127.0.0.1:9092");
        broker.put(AdvisedConfig.BOOTSTRAP, "b1:9095");
        broker.put(AdvisedConfig.PLANS_TOPIC, "plans");
        broker.put(AdvisedConfig.MAX_AGE_MS, "60000");
        broker.put(AdvisedConfig.MIN_PRESENT, "0.75");
        broker.put(AdvisedConfig.CONSUMER_PREFIX + "security.protocol", "SASL_SSL");
        broker.put(AdvisedConfig.CONSUMER_PREFIX + "sasl.jaas.config", new Password("secret-jaas"));
        AdvisedConfig config = AdvisedConfig.from(broker);
        assertEquals("b1:9095", config.bootstrapServers());
        assertEquals("plans", config.plansTopic());
        assertEquals(60_000L, config.maxPlanAgeMs());
        assertEquals(0.75, config.minPresentFraction());
        assertEquals(Map.of("security.protocol", "SASL_SSL", "sasl.jaas.config", "secret-jaas"),
            config.consumerOverrides());
    }

    @Test
    void badValuesStopTheBrokerWithTheKeyNamed() {
        Map<String, String> base = Map.of("listeners", "PLAINTEXT://127.0.0.1:9092");
        for (Map.Entry<String, String> bad : java.util.List.of(Map.entry(AdvisedConfig.MAX_AGE_MS, "soon"),
            Map.entry(AdvisedConfig.MAX_AGE_MS, "-5"), Map.entry(AdvisedConfig.MIN_PRESENT, "1.5"),
            Map.entry(AdvisedConfig.MIN_PRESENT, "half"), Map.entry(AdvisedConfig.NAME, " "))) {
            Map<String, String> broker = new HashMap<>(base);
            broker.put(bad.getKey(), bad.getValue());
            ConfigException error = assertThrows(ConfigException.class, () -> AdvisedConfig.from(broker));
            assertTrue(error.getMessage().contains(bad.getKey()), error.getMessage());
        }
    }

    @Test
    void noListenerAndNoBootstrapIsRefused() {
        ConfigException error = assertThrows(ConfigException.class, () -> AdvisedConfig.from(Map.of()));
        assertTrue(error.getMessage().contains(AdvisedConfig.BOOTSTRAP), error.getMessage());
    }
}
