package io.rebalanceadvisor.broker.assignor;

import org.apache.kafka.common.Uuid;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Records of the plans topic, good and bad (docs/reference/broker-plan-record.md). */
class PlanRecordParserTest {

    private static final Uuid ORDERS = Uuid.fromString("AAAAAAAAAAAAAAAAAAAAAA");
    private static final Uuid PAYMENTS = Uuid.randomUuid();

    private static PlanRecordParser.Parsed parse(String json) {
        return PlanRecordParser.parse("live-orders", json == null ? null : json.getBytes(StandardCharsets.UTF_8));
    }

    private static String record(String members) {
        return "{\"version\": 1, \"group\": \"live-orders\", \"plan_id\": \"p-1\", \"epoch\": 7, "
            + "\"published_at_ms\": 1795000000000, \"members\": [" + members + "]}";
    }

    @Test
    void theDocumentedExampleReadsWhole() {
        PlanRecordParser.Parsed parsed = parse(record(
            "{\"member_id\": \"mH3k\", \"instance_id\": null, \"partitions\": ["
                + "{\"topic\": \"orders\", \"topic_id\": \"AAAAAAAAAAAAAAAAAAAAAA\", \"partition\": 2},"
                + "{\"topic\": \"orders\", \"topic_id\": \"AAAAAAAAAAAAAAAAAAAAAA\", \"partition\": 0}]},"
                + "{\"member_id\": \"other\", \"instance_id\": \"worker-1\", \"partitions\": "
                + "[{\"topic\": \"payments\", \"topic_id\": \"" + PAYMENTS + "\", \"partition\": 3}]}"));
        assertNull(parsed.problem());
        Plan plan = parsed.plan();
        assertEquals("live-orders", plan.group());
        assertEquals("p-1", plan.planId());
        assertEquals(7, plan.epoch());
        assertEquals(1795000000000L, plan.publishedAtMs());
        assertEquals("mH3k", plan.members().get(0).memberId());
        assertNull(plan.members().get(0).instanceId());
        assertArrayEquals(new int[] {0, 2}, plan.members().get(0).partitions().get(ORDERS));
        assertEquals("worker-1", plan.members().get(1).instanceId());
        assertArrayEquals(new int[] {3}, plan.members().get(1).partitions().get(PAYMENTS));
    }

    @Test
    void topicIdsAreReadInEitherBase64Alphabet() {
        Uuid id = new Uuid(0xFBEF_BEFB_EFBE_FBEFL, 0x0123_4567_89AB_CDEFL);  // encodes with '-' and '_'
        String urlSafe = id.toString();
        assertTrue(urlSafe.contains("-") || urlSafe.contains("_"), urlSafe);
        String standard = java.util.Base64.getEncoder().encodeToString(java.nio.ByteBuffer.allocate(16)
            .putLong(id.getMostSignificantBits()).putLong(id.getLeastSignificantBits()).array());
        for (String text : new String[] {urlSafe, standard, standard.replace("=", "")}) {
            PlanRecordParser.Parsed parsed = parse(record("{\"member_id\": \"a\", \"partitions\": "
                + "[{\"topic_id\": \"" + text + "\", \"partition\": 1}]}"));
            assertNull(parsed.problem(), text);
            assertArrayEquals(new int[] {1}, parsed.plan().members().get(0).partitions().get(id), text);
        }
    }

    @Test
    void aTombstoneWithdrawsThePlanSilently() {
        assertNull(parse(null).plan());
        assertNull(parse(null).problem());
        assertNull(parse("").plan());
    }

    @Test
    void recordsThatCannotBeAPlanLeaveTheGroupWithoutOne() {
        String[] bad = {
            "{not json", "[1, 2]", "\"text\"", "{\"members\": []}",
            "{\"version\": \"one\", \"published_at_ms\": 1, \"members\": []}",
            "{\"version\": 1, \"members\": []}",
            "{\"version\": 1, \"published_at_ms\": 1, \"members\": {}}",
        };
        for (String value : bad) {
            PlanRecordParser.Parsed parsed = parse(value);
            assertNull(parsed.plan(), value);
            assertNotNull(parsed.problem(), value);
            assertTrue(parsed.problem().contains("live-orders"), parsed.problem());
            assertTrue(!parsed.problem().contains("\n"), "one line: " + parsed.problem());
        }
    }

    @Test
    void aNewerVersionIsRefusedWithAMessageSayingSo() {
        PlanRecordParser.Parsed parsed = parse("{\"version\": 2, \"published_at_ms\": 1, \"members\": []}");
        assertNull(parsed.plan());
        assertTrue(parsed.problem().contains("version 2"), parsed.problem());
    }

    @Test
    void badMembersAndPartitionsAreSkippedAndTheRestKept() {
        PlanRecordParser.Parsed parsed = parse(record(
            "{\"partitions\": []},"
                + "{\"member_id\": \"no-list\"},"
                + "{\"member_id\": \"a\", \"partitions\": ["
                + "{\"topic_id\": \"not-a-uuid\", \"partition\": 1},"
                + "{\"topic_id\": \"" + ORDERS + "\", \"partition\": \"two\"},"
                + "{\"topic_id\": \"" + ORDERS + "\"},"
                + "{\"topic_id\": \"" + ORDERS + "\", \"partition\": 4}]}"));
        assertNotNull(parsed.plan());
        assertEquals(1, parsed.plan().members().size());
        assertArrayEquals(new int[] {4}, parsed.plan().members().get(0).partitions().get(ORDERS));
        assertTrue(parsed.problem().contains("skipped 5 bad part(s)"), parsed.problem());
    }
}
