package io.rebalanceadvisor.broker.telemetry;

import io.opentelemetry.proto.common.v1.AnyValue;
import io.opentelemetry.proto.common.v1.KeyValue;
import io.opentelemetry.proto.metrics.v1.Gauge;
import io.opentelemetry.proto.metrics.v1.Metric;
import io.opentelemetry.proto.metrics.v1.MetricsData;
import io.opentelemetry.proto.metrics.v1.NumberDataPoint;
import io.opentelemetry.proto.metrics.v1.ResourceMetrics;
import io.opentelemetry.proto.metrics.v1.ScopeMetrics;
import io.opentelemetry.proto.resource.v1.Resource;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.InputStream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Real pushes captured on the local broker (src/test/resources/pushes, with the capture's context
 * beside each): a Java 4.3.1 consumer and a confluent-kafka 2.16.1 (librdkafka 2.16.0) consumer.
 * Expected values were read from the bytes with a generic protobuf dump, not from this decoder.
 */
class PushDecoderTest {

    static byte[] fixture(String name) throws IOException {
        try (InputStream in = PushDecoderTest.class.getResourceAsStream("/pushes/" + name)) {
            assertNotNull(in, name);
            return in.readAllBytes();
        }
    }

    static Push push(byte[] data) {
        return new Push("instance", "client", "apache-kafka-java", "4.3.1", 5000, 1_000L, false, "OTLP", data);
    }

    @Test
    void javaConsumerPush() throws IOException {
        PushDecoder.Decoded decoded = PushDecoder.decode(push(fixture("java-4.3.1-consumer.bin")));
        MemberSample sample = decoded.sample();
        assertEquals(PushDecoder.Problem.NONE, decoded.problem());
        assertEquals("cap-java", sample.group());
        assertEquals("52SuVfQDTk2ZXb0j9obZUg", sample.memberId(), "Java's group_member_id");
        assertEquals("inst-java", sample.instanceId());
        assertEquals(0.3273592002983834, sample.idleRatio(), 1e-15);
        assertEquals(1795778746172L, sample.idleTimeMs());
        // the client-wide point, not the per-topic one (same count here, one topic), delta over 4.93 s
        assertEquals(7040.0, sample.recordsConsumed(), 0.0);
        assertEquals(1795778741159L, sample.recordsStartMs());
        assertEquals(1795778746173L, sample.recordsTimeMs());
        assertTrue(sample.recordsDelta());
        assertEquals(0, decoded.badValues());
    }

    @Test
    void librdkafkaConsumerPush() throws IOException {
        PushDecoder.Decoded decoded = PushDecoder.decode(push(fixture("librdkafka-2.16.0-consumer.bin")));
        MemberSample sample = decoded.sample();
        assertEquals("cap-python", sample.group());
        assertEquals("CPyKUtiRR/CBcL7echGsYA", sample.memberId(), "librdkafka's member_id");
        assertEquals("inst-python", sample.instanceId());
        assertEquals(0.186611, sample.idleRatio(), 1e-12);
        assertEquals(1795778719447L, sample.idleTimeMs());
        assertTrue(Double.isNaN(sample.recordsConsumed()), "librdkafka sends no records-consumed count");
    }

    @Test
    void malformedBytesGiveAProblemNotAnException() throws IOException {
        byte[] real = fixture("java-4.3.1-consumer.bin");
        byte[] cut = java.util.Arrays.copyOf(real, real.length / 2);
        assertEquals(PushDecoder.Problem.MALFORMED, PushDecoder.decode(push(cut)).problem());
        assertEquals(PushDecoder.Problem.MALFORMED, PushDecoder.decode(push(new byte[] {(byte) 0xff, 1, 2})).problem());
        assertEquals(PushDecoder.Problem.MALFORMED, PushDecoder.decode(push(null)).problem());
        java.util.Random random = new java.util.Random(7);
        for (int i = 0; i < 500; i++) {
            byte[] noise = new byte[random.nextInt(400)];
            random.nextBytes(noise);
            assertNotNull(PushDecoder.decode(push(noise)).problem());
        }
    }

    @Test
    void aClientOutsideAGroupGivesNoSample() {
        byte[] producer = data(resource("client_rack", "r1"), gauge(PushDecoder.IDLE_RATIO, 0.5)).toByteArray();
        PushDecoder.Decoded decoded = PushDecoder.decode(push(producer));
        assertNull(decoded.sample());
        assertEquals(PushDecoder.Problem.NOT_A_MEMBER, decoded.problem());
    }

    @Test
    void outOfRangeValuesAreIgnoredAndCounted() {
        for (double bad : new double[] {Double.NaN, -0.1, 1.5, Double.POSITIVE_INFINITY}) {
            byte[] bytes = data(member(), gauge(PushDecoder.IDLE_RATIO, bad)).toByteArray();
            PushDecoder.Decoded decoded = PushDecoder.decode(push(bytes));
            assertNull(decoded.sample(), "idle ratio " + bad);
            assertEquals(PushDecoder.Problem.NO_METRIC, decoded.problem());
            assertEquals(1, decoded.badValues());
        }
        byte[] negative = data(member(), gauge(PushDecoder.RECORDS_CONSUMED, -5), gauge(PushDecoder.IDLE_RATIO, 0.25))
            .toByteArray();
        PushDecoder.Decoded decoded = PushDecoder.decode(push(negative));
        assertEquals(0.25, decoded.sample().idleRatio());
        assertTrue(Double.isNaN(decoded.sample().recordsConsumed()));
        assertEquals(1, decoded.badValues());
    }

    @Test
    void unknownMetricsAreSkipped() {
        byte[] other = data(member(), gauge("org.apache.kafka.consumer.something.else", 3)).toByteArray();
        assertEquals(PushDecoder.Problem.NO_METRIC, PushDecoder.decode(push(other)).problem());
        byte[] both = data(member(), gauge("x.y", 3), gauge(PushDecoder.IDLE_RATIO, 0.75)).toByteArray();
        assertFalse(Double.isNaN(PushDecoder.decode(push(both)).sample().idleRatio()));
    }

    @Test
    void javasTimeBetweenPollsIsKeptAndAbsurdOnesCounted() {
        byte[] bytes = data(member(), gauge(PushDecoder.IDLE_RATIO, 0.4), gauge(PushDecoder.TIME_BETWEEN_POLL, 12.5))
            .toByteArray();
        assertEquals(12.5, PushDecoder.decode(push(bytes)).sample().timeBetweenPollMs());
        for (double bad : new double[] {Double.NaN, -1, 1e12}) {
            byte[] wrong = data(member(), gauge(PushDecoder.IDLE_RATIO, 0.4), gauge(PushDecoder.TIME_BETWEEN_POLL, bad))
                .toByteArray();
            PushDecoder.Decoded decoded = PushDecoder.decode(push(wrong));
            assertTrue(Double.isNaN(decoded.sample().timeBetweenPollMs()), "time between polls " + bad);
            assertEquals(1, decoded.badValues());
        }
        assertTrue(PushDecoder.SUBSCRIBED.contains(PushDecoder.TIME_BETWEEN_POLL));
    }

    static Resource member() {
        return Resource.newBuilder().addAttributes(kv("group_id", "g")).addAttributes(kv("member_id", "m")).build();
    }

    static Resource resource(String key, String value) {
        return Resource.newBuilder().addAttributes(kv(key, value)).build();
    }

    static KeyValue kv(String key, String value) {
        return KeyValue.newBuilder().setKey(key).setValue(AnyValue.newBuilder().setStringValue(value)).build();
    }

    static Metric gauge(String name, double value) {
        return Metric.newBuilder().setName(name).setGauge(Gauge.newBuilder()
            .addDataPoints(NumberDataPoint.newBuilder().setAsDouble(value).setTimeUnixNano(5_000_000L))).build();
    }

    static MetricsData data(Resource resource, Metric... metrics) {
        ScopeMetrics.Builder scope = ScopeMetrics.newBuilder();
        for (Metric metric : metrics) {
            scope.addMetrics(metric);
        }
        return MetricsData.newBuilder().addResourceMetrics(ResourceMetrics.newBuilder().setResource(resource)
            .addScopeMetrics(scope)).build();
    }
}
