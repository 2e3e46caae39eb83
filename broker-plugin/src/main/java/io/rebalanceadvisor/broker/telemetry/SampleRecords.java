package io.rebalanceadvisor.broker.telemetry;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.rebalanceadvisor.broker.telemetry.MemberSample.MemberKey;

import java.nio.charset.StandardCharsets;
import java.util.Map;

/**
 * The telemetry topic's keys and values, JSON (docs/operations/telemetry.md, "The record"); the
 * snapshot's reader is adapters/client_telemetry.py. A NaN (not sent) is written as null.
 */
public final class SampleRecords {

    public static final int VERSION = 1;
    private static final ObjectMapper JSON = new ObjectMapper();

    private SampleRecords() {
    }

    public static byte[] key(MemberKey key) {
        ObjectNode node = JSON.createObjectNode();
        node.put("group", key.group());
        node.put("member_id", key.memberId());
        return bytes(node);
    }

    public static byte[] value(MemberSample sample, String brokerId) {
        ObjectNode node = JSON.createObjectNode();
        node.put("version", VERSION);
        node.put("group", sample.group());
        node.put("member_id", sample.memberId());
        node.put("instance_id", sample.instanceId());
        node.put("client_id", sample.clientId());
        node.put("client_instance_id", sample.clientInstanceId());
        node.put("software_name", sample.softwareName());
        node.put("software_version", sample.softwareVersion());
        number(node, "idle_ratio", sample.idleRatio());
        node.put("idle_time_ms", sample.idleTimeMs());
        number(node, "records_consumed", sample.recordsConsumed());
        node.put("records_start_ms", sample.recordsStartMs());
        node.put("records_time_ms", sample.recordsTimeMs());
        node.put("records_delta", sample.recordsDelta());
        number(node, "time_between_poll_ms", sample.timeBetweenPollMs());
        ArrayNode recent = node.putArray("recent_idle");
        for (MemberSample.IdleReading reading : sample.recentIdle()) {
            recent.addArray().add(reading.timeMs()).add(reading.idleRatio());
        }
        node.put("push_interval_ms", sample.pushIntervalMs());
        node.put("received_ms", sample.receivedMs());
        node.put("broker", brokerId);
        return bytes(node);
    }

    /** The broker's counters, under a key no member has. */
    public static byte[] countersKey(String brokerId) {
        ObjectNode node = JSON.createObjectNode();
        node.put("broker", brokerId);
        return bytes(node);
    }

    public static byte[] counters(Map<String, Long> counts, long nowMs) {
        ObjectNode node = JSON.createObjectNode();
        node.put("version", VERSION);
        node.put("time_ms", nowMs);
        counts.forEach(node::put);
        return bytes(node);
    }

    private static void number(ObjectNode node, String name, double value) {
        if (Double.isFinite(value)) {
            node.put(name, value);
        } else {
            node.putNull(name);
        }
    }

    private static byte[] bytes(ObjectNode node) {
        return node.toString().getBytes(StandardCharsets.UTF_8);
    }
}
