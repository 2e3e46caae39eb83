package io.rebalanceadvisor.broker.telemetry;

import com.google.protobuf.InvalidProtocolBufferException;
import io.opentelemetry.proto.common.v1.KeyValue;
import io.opentelemetry.proto.metrics.v1.AggregationTemporality;
import io.opentelemetry.proto.metrics.v1.Metric;
import io.opentelemetry.proto.metrics.v1.MetricsData;
import io.opentelemetry.proto.metrics.v1.NumberDataPoint;
import io.opentelemetry.proto.metrics.v1.ResourceMetrics;
import io.opentelemetry.proto.metrics.v1.ScopeMetrics;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Decodes one OTLP push (KIP-714: {@code MetricsData}, protobuf) into the member's sample. Pure: no
 * I/O, never throws; what it cannot use it reports in {@link Decoded}. Names and attributes as the
 * clients send them: docs/operations/telemetry.md, "What the clients push".
 */
public final class PushDecoder {

    public static final String IDLE_RATIO = "org.apache.kafka.consumer.poll.idle.ratio.avg";
    public static final String RECORDS_CONSUMED = "org.apache.kafka.consumer.fetch.manager.records.consumed.total";
    /** Java only: the mean time between two polls' starts, ms (records per poll: docs/operations/telemetry.md). */
    public static final String TIME_BETWEEN_POLL = "org.apache.kafka.consumer.time.between.poll.avg";
    /** The metric names of the subscription (exact, so each push stays small). */
    public static final List<String> SUBSCRIBED = List.of(IDLE_RATIO, RECORDS_CONSUMED, TIME_BETWEEN_POLL);

    /** A time between polls past a day is absurd (max.poll.interval.ms caps it far lower). */
    static final double MAX_BETWEEN_POLLS_MS = 86_400_000.0;
    static final String GROUP = "group_id";
    static final String INSTANCE = "group_instance_id";
    /** Java names the member id {@code group_member_id}; librdkafka {@code member_id}. */
    static final List<String> MEMBER = List.of("group_member_id", "member_id");

    /** What one push gave: a sample (or null) and what was wrong with it. */
    public record Decoded(MemberSample sample, int badValues, Problem problem) {
    }

    /** Why a push gave no sample; NONE when it gave one. */
    public enum Problem { NONE, MALFORMED, NOT_A_MEMBER, NO_METRIC }

    private PushDecoder() {
    }

    /** The sample of {@code push}; never throws, whatever the bytes. */
    public static Decoded decode(Push push) {
        if (push.data() == null) {
            return new Decoded(null, 0, Problem.MALFORMED);
        }
        try {
            // the content type is not checked: Java and librdkafka both send "OTLP", KIP-714 says protobuf
            return decode(push, MetricsData.parseFrom(push.data()));
        } catch (InvalidProtocolBufferException | RuntimeException | StackOverflowError malformed) {
            return new Decoded(null, 0, Problem.MALFORMED);
        }
    }

    /** Java sends one resource per metric, each with the member's attributes: they are merged. */
    private static Decoded decode(Push push, MetricsData data) {
        String group = "";
        String member = "";
        String instance = "";
        Values values = new Values();
        for (ResourceMetrics resource : data.getResourceMetricsList()) {
            Map<String, String> attributes = strings(resource.getResource().getAttributesList());
            String g = attributes.getOrDefault(GROUP, "");
            String m = MEMBER.stream().map(k -> attributes.getOrDefault(k, "")).filter(x -> !x.isEmpty())
                .findFirst().orElse("");
            if (g.isEmpty() || m.isEmpty() || (!member.isEmpty() && !(g.equals(group) && m.equals(member)))) {
                continue;
            }
            group = g;
            member = m;
            instance = attributes.getOrDefault(INSTANCE, instance);
            for (ScopeMetrics scope : resource.getScopeMetricsList()) {
                for (Metric metric : scope.getMetricsList()) {
                    values.take(metric);
                }
            }
        }
        if (member.isEmpty()) {
            return new Decoded(null, 0, Problem.NOT_A_MEMBER);
        }
        Point idle = values.idle;
        Point records = values.records();
        if (idle == null && records == null && values.betweenPolls == null) {
            return new Decoded(null, values.bad, Problem.NO_METRIC);
        }
        MemberSample sample = new MemberSample(group, member, instance, push.clientId(), push.clientInstanceId(),
            push.softwareName(), push.softwareVersion(), idle == null ? Double.NaN : idle.value,
            idle == null ? 0 : idle.timeMs, records == null ? Double.NaN : records.value,
            records == null ? 0 : records.startMs, records == null ? 0 : records.timeMs,
            records != null && records.delta, values.betweenPolls == null ? Double.NaN : values.betweenPolls.value,
            push.pushIntervalMs(), push.receivedMs(), List.of());
        return new Decoded(sample, values.bad, Problem.NONE);
    }

    private static Map<String, String> strings(List<KeyValue> attributes) {
        Map<String, String> found = new HashMap<>();
        for (KeyValue attribute : attributes) {
            if (attribute.getValue().hasStringValue()) {
                found.put(attribute.getKey(), attribute.getValue().getStringValue());
            }
        }
        return found;
    }

    /** A value and the client's times of it (ms since the epoch); {@code delta}: counted since startMs. */
    private record Point(double value, long startMs, long timeMs, boolean delta) {
    }

    /** The metrics of one push, with the count of values out of range. */
    private static final class Values {
        Point idle;
        Point betweenPolls;
        Point recordsTotal;
        Point recordsByTopic;
        int bad;

        void take(Metric metric) {
            boolean delta = metric.getDataCase() == Metric.DataCase.SUM
                && metric.getSum().getAggregationTemporality() == AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA;
            for (NumberDataPoint point : points(metric)) {
                double value = point.getValueCase() == NumberDataPoint.ValueCase.AS_INT
                    ? point.getAsInt() : point.getAsDouble();
                Point taken = new Point(value, point.getStartTimeUnixNano() / 1_000_000L,
                    point.getTimeUnixNano() / 1_000_000L, delta);
                boolean perTopic = point.getAttributesList().stream().anyMatch(a -> a.getKey().equals("topic"));
                if (metric.getName().equals(IDLE_RATIO) && !perTopic) {
                    idle = check(taken, value >= 0 && value <= 1, idle);  // NaN fails both
                } else if (metric.getName().equals(TIME_BETWEEN_POLL) && !perTopic) {
                    betweenPolls = check(taken, value >= 0 && value < MAX_BETWEEN_POLLS_MS, betweenPolls);
                } else if (metric.getName().equals(RECORDS_CONSUMED)) {
                    Point valid = check(taken, value >= 0 && Double.isFinite(value), null);
                    if (valid != null && !perTopic) {
                        recordsTotal = valid;
                    } else if (valid != null) {
                        recordsByTopic = recordsByTopic == null ? valid : new Point(recordsByTopic.value + value,
                            Math.min(recordsByTopic.startMs, valid.startMs), Math.max(recordsByTopic.timeMs,
                            valid.timeMs), delta);
                    }
                }
            }
        }

        /** The client-wide count; without one (Java also sends one per topic), the topics' sum. */
        Point records() {
            return recordsTotal != null ? recordsTotal : recordsByTopic;
        }

        private Point check(Point point, boolean valid, Point kept) {
            if (valid) {
                return point;
            }
            bad++;
            return kept;
        }

        private static List<NumberDataPoint> points(Metric metric) {
            return switch (metric.getDataCase()) {
                case GAUGE -> metric.getGauge().getDataPointsList();
                case SUM -> metric.getSum().getDataPointsList();
                default -> List.of();
            };
        }
    }
}
