package io.rebalanceadvisor.broker.assignor;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.junit.jupiter.api.Test;

import java.util.Map;
import java.util.Set;

import static io.rebalanceadvisor.broker.assignor.Specs.group;
import static io.rebalanceadvisor.broker.assignor.Specs.member;
import static io.rebalanceadvisor.broker.assignor.Specs.plan;
import static io.rebalanceadvisor.broker.assignor.Specs.topics;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class PlanApplierTest {

    private static final Uuid ORDERS = Uuid.randomUuid();
    private static final Uuid PAYMENTS = Uuid.randomUuid();
    private static final Uuid GONE = Uuid.randomUuid();

    private static PlanMatch match(Map<String, PlanMember> members) {
        return new PlanMatch(plan("g", 0, members.values().toArray(PlanMember[]::new)), members);
    }

    @Test
    void placesThePlansPartitionsAmongThoseTheMemberMayHave() {
        GroupSpec spec = group(member("a").subscribes(ORDERS), member("b").subscribes(ORDERS, PAYMENTS, GONE));
        PlanMember a = new PlanMember("a", null, Map.of(ORDERS, new int[] {0, 2}, PAYMENTS, new int[] {0}));
        PlanMember b = new PlanMember("b", null, Map.of(ORDERS, new int[] {1, 7, -1}, PAYMENTS, new int[] {1},
            GONE, new int[] {0}));
        Specs.Recorded notes = new Specs.Recorded();
        Placement placement = PlanApplier.apply(match(Map.of("a", a, "b", b)), spec,
            topics(ORDERS, 4, PAYMENTS, 2), notes);
        assertEquals(Map.of(ORDERS, Set.of(0, 2)), placement.partitionsOf("a"), "payments dropped: a does not subscribe");
        assertEquals(Map.of(ORDERS, Set.of(1), PAYMENTS, Set.of(1)), placement.partitionsOf("b"));
        assertFalse(placement.isPlaced(PAYMENTS, 0));
        assertTrue(notes.has("unsubscribed:g"));
        assertTrue(notes.has("unknown-partition:g"), "7 and -1 of a 4-partition topic");
        assertTrue(notes.has("unknown-topic:g"), "b subscribes to a topic id the metadata does not know");
    }

    @Test
    void aPartitionGivenTwiceStaysWithTheFirst() {
        GroupSpec spec = group(member("a").subscribes(ORDERS), member("b").subscribes(ORDERS));
        Map<String, PlanMember> members = new java.util.LinkedHashMap<>();
        members.put("a", new PlanMember("a", null, Map.of(ORDERS, new int[] {0, 1})));
        members.put("b", new PlanMember("b", null, Map.of(ORDERS, new int[] {1, 2})));
        Specs.Recorded notes = new Specs.Recorded();
        Placement placement = PlanApplier.apply(match(members), spec, topics(ORDERS, 3), notes);
        assertEquals(Set.of(0, 1), placement.partitionsOf("a").get(ORDERS));
        assertEquals(Set.of(2), placement.partitionsOf("b").get(ORDERS));
        assertTrue(notes.has("duplicate:g"));
        assertEquals(3, placement.placedCount(ORDERS));
    }
}
