package io.rebalanceadvisor.broker.assignor;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.kafka.common.Uuid;

import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Reads one record of the plans topic (docs/reference/broker-plan-record.md). A record that cannot
 * be a plan leaves its group without one (uniform); a bad member or partition entry is skipped and
 * the rest of the plan kept. Either way the result says what was wrong, in one line.
 */
final class PlanRecordParser {

    /** The newest record version this plugin understands. */
    static final int VERSION = 1;

    private static final ObjectMapper JSON = new ObjectMapper();

    /**
     * @param plan    null: the group has no plan (a tombstone, or a record that is not a usable plan)
     * @param problem null when the record was read whole; else what was skipped or why it was refused
     */
    record Parsed(Plan plan, String problem) { }

    private PlanRecordParser() { }

    static Parsed parse(String group, byte[] value) {
        if (value == null || value.length == 0) {
            return new Parsed(null, null);
        }
        JsonNode root;
        try {
            root = JSON.readTree(value);
        } catch (IOException error) {
            return refused(group, "is not JSON (" + firstLine(error.getMessage()) + ")");
        }
        if (root == null || !root.isObject()) {
            return refused(group, "is not a JSON object");
        }
        JsonNode version = root.get("version");
        if (version == null || !version.canConvertToInt()) {
            return refused(group, "has no whole-number \"version\"");
        }
        if (version.intValue() > VERSION) {
            return refused(group, "has version " + version.intValue() + ", newer than this plugin reads ("
                + VERSION + "); upgrade the plugin");
        }
        JsonNode published = root.get("published_at_ms");
        if (published == null || !published.canConvertToLong()) {
            return refused(group, "has no whole-number \"published_at_ms\"");
        }
        JsonNode members = root.get("members");
        if (members == null || !members.isArray()) {
            return refused(group, "has no \"members\" list");
        }
        List<String> skipped = new ArrayList<>();
        List<PlanMember> planMembers = new ArrayList<>();
        Map<String, Uuid> topicIds = new HashMap<>();  // one Uuid per topic: cheaper lookups in assign()
        for (JsonNode member : members) {
            PlanMember parsed = member(member, skipped, topicIds);
            if (parsed != null) {
                planMembers.add(parsed);
            }
        }
        String planId = root.path("plan_id").asText("?");
        Plan plan = new Plan(group, planId, root.path("epoch").asLong(-1), published.longValue(), planMembers);
        String problem = skipped.isEmpty() ? null : "the plan record of group " + group + " (plan " + planId
            + "): skipped " + skipped.size() + " bad part(s), the rest applies; first: " + skipped.get(0);
        return new Parsed(plan, problem);
    }

    private static PlanMember member(JsonNode node, List<String> skipped, Map<String, Uuid> topicIds) {
        String memberId = textOrNull(node.get("member_id"));
        String instanceId = textOrNull(node.get("instance_id"));
        if (memberId == null && instanceId == null) {
            skipped.add("a member with neither \"member_id\" nor \"instance_id\"");
            return null;
        }
        JsonNode partitions = node.get("partitions");
        if (partitions == null || !partitions.isArray()) {
            skipped.add("member " + (instanceId != null ? instanceId : memberId) + " has no \"partitions\" list");
            return null;
        }
        Map<Uuid, List<Integer>> byTopic = new LinkedHashMap<>();
        for (JsonNode partition : partitions) {
            Uuid topic = topicIds.computeIfAbsent(textOrEmpty(partition.get("topic_id")),
                text -> topicId(partition.get("topic_id")));
            JsonNode number = partition.get("partition");
            if (topic == null || number == null || !number.canConvertToInt() || !number.isIntegralNumber()) {
                skipped.add("partition entry " + partition + " needs a \"topic_id\" (base64 UUID) and a whole "
                    + "\"partition\"");
                continue;
            }
            byTopic.computeIfAbsent(topic, t -> new ArrayList<>()).add(number.intValue());
        }
        Map<Uuid, int[]> arrays = new LinkedHashMap<>();
        byTopic.forEach((topic, numbers) -> arrays.put(topic, numbers.stream().mapToInt(Integer::intValue).toArray()));
        return new PlanMember(memberId, instanceId, arrays);
    }

    /**
     * Kafka's URL-safe base64 form ({@code Uuid.toString()}), and also the standard alphabet with or
     * without padding, which some clients print (confluent-kafka's {@code str(topic_id)} does).
     */
    static Uuid topicId(JsonNode node) {
        String text = textOrNull(node);
        if (text == null) {
            return null;
        }
        String urlSafe = text.replace('+', '-').replace('/', '_');
        while (urlSafe.endsWith("=")) {
            urlSafe = urlSafe.substring(0, urlSafe.length() - 1);
        }
        try {
            return Uuid.fromString(urlSafe);
        } catch (IllegalArgumentException error) {
            return null;
        }
    }

    private static String textOrEmpty(JsonNode node) {
        String text = textOrNull(node);
        return text == null ? "" : text;
    }

    private static String textOrNull(JsonNode node) {
        return node == null || !node.isTextual() || node.asText().isEmpty() ? null : node.asText();
    }

    private static Parsed refused(String group, String why) {
        return new Parsed(null, "the plan record of group " + group + " " + why
            + "; the group is assigned by uniform until a good record replaces it");
    }

    private static String firstLine(String text) {
        if (text == null) {
            return "";
        }
        int newline = text.indexOf('\n');
        return newline < 0 ? text : text.substring(0, newline);
    }
}
