package io.rebalanceadvisor.broker.assignor;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;
import java.util.Set;

import static io.rebalanceadvisor.broker.assignor.Specs.assertComplete;
import static io.rebalanceadvisor.broker.assignor.Specs.group;
import static io.rebalanceadvisor.broker.assignor.Specs.member;
import static io.rebalanceadvisor.broker.assignor.Specs.partitionsOf;
import static io.rebalanceadvisor.broker.assignor.Specs.plan;
import static io.rebalanceadvisor.broker.assignor.Specs.planned;
import static io.rebalanceadvisor.broker.assignor.Specs.topics;
import static io.rebalanceadvisor.broker.assignor.Specs.view;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Hand-worked cases of the whole assign(): plan, fill, fallbacks. */
class AdvisedAssignorTest {

    private static final Uuid T = Uuid.randomUuid();
    private static final Uuid U = Uuid.randomUuid();
    private static final long NOW = 1_800_000_000_000L;

    private final Specs.Recorded notes = new Specs.Recorded();

    private AdvisedAssignor advised(Plan... plans) {
        PlanIndex index = PlanIndex.of(List.of(plans));
        return new AdvisedAssignor(AdvisedConfig.defaults("unused:9092"), () -> index, () -> NOW, notes);
    }

    @Test
    void thePlanIsAppliedWholeWhenAllItsMembersArePresent() {
        GroupSpec spec = group(member("a").subscribes(T).owns(T, 0, 1), member("b").subscribes(T).owns(T, 2, 3),
            member("c").subscribes(T).owns(T, 4, 5));
        Plan plan = plan("g", NOW, planned("a", null, T, 0, 1, 2, 3), planned("b", null, T, 4), planned("c", null, T, 5));
        GroupAssignment result = advised(plan).assign(spec, topics(T, 6));
        assertEquals(Map.of("a", Map.of(T, Set.of(0, 1, 2, 3)), "b", Map.of(T, Set.of(4)), "c", Map.of(T, Set.of(5))),
            view(result));
        assertTrue(notes.keys.isEmpty(), notes.messages.toString());
    }

    @Test
    void aPlanAlreadyInForceReturnsTheCurrentAssignmentsUncopied() {
        GroupSpec spec = group(member("a").subscribes(T).owns(T, 0, 1, 2), member("b").subscribes(T).owns(T, 3));
        Plan plan = plan("g", NOW, planned("a", null, T, 0, 1, 2), planned("b", null, T, 3));
        GroupAssignment result = advised(plan).assign(spec, topics(T, 4));
        assertSame(spec.memberAssignment("a").partitions(), result.members().get("a").partitions());
        assertSame(spec.memberAssignment("b").partitions(), result.members().get("b").partitions());
    }

    @Test
    void aMemberThatLeftIsReplacedByTheNewMemberInTheRest() {
        GroupSpec spec = group(member("a").subscribes(T).owns(T, 0, 1), member("b").subscribes(T).owns(T, 2, 3),
            member("d").subscribes(T));
        Plan plan = plan("g", NOW, planned("a", null, T, 0, 1), planned("b", null, T, 2, 3), planned("c", null, T, 4, 5));
        GroupAssignment result = advised(plan).assign(spec, topics(T, 6));
        assertEquals(Map.of("a", Map.of(T, Set.of(0, 1)), "b", Map.of(T, Set.of(2, 3)), "d", Map.of(T, Set.of(4, 5))),
            view(result));
    }

    @Test
    void newPartitionsGoToMembersThePlanGaveNothing() {
        GroupSpec spec = group(member("a").subscribes(T), member("b").subscribes(T), member("d").subscribes(T));
        Plan plan = plan("g", NOW, planned("a", null, T, 0, 1, 2), planned("b", null, T, 3, 4, 5));
        GroupAssignment result = advised(plan).assign(spec, topics(T, 8));
        assertEquals(Map.of("a", Map.of(T, Set.of(0, 1, 2)), "b", Map.of(T, Set.of(3, 4, 5)), "d", Map.of(T, Set.of(6, 7))),
            view(result));
    }

    @Test
    void newPartitionsAreSpreadOverThePlannedMembersWhenNoOtherSubscribes() {
        GroupSpec spec = group(member("a").subscribes(T), member("b").subscribes(T));
        Plan plan = plan("g", NOW, planned("a", null, T, 0, 1, 2), planned("b", null, T, 3, 4, 5));
        GroupAssignment result = advised(plan).assign(spec, topics(T, 8));
        Set<Integer> a = partitionsOf(result, "a", T);
        Set<Integer> b = partitionsOf(result, "b", T);
        assertTrue(a.containsAll(Set.of(0, 1, 2)) && a.size() == 4, "a: " + a);
        assertTrue(b.containsAll(Set.of(3, 4, 5)) && b.size() == 4, "b: " + b);
        assertComplete(spec, topics(T, 8), result);
    }

    @Test
    void aNewMemberGetsNothingWhileThePlanPlacesEverything() {
        GroupSpec spec = group(member("a").subscribes(T), member("b").subscribes(T), member("new").subscribes(T));
        Plan plan = plan("g", NOW, planned("a", null, T, 0, 1, 2), planned("b", null, T, 3));
        GroupAssignment result = advised(plan).assign(spec, topics(T, 4));
        assertEquals(Map.of("a", Map.of(T, Set.of(0, 1, 2)), "b", Map.of(T, Set.of(3)), "new", Map.of()), view(result));
    }

    @Test
    void theRestKeepsItsCurrentOwners() {
        GroupSpec spec = group(member("a").subscribes(T).owns(T, 0), member("b").subscribes(T).owns(T, 1),
            member("d").subscribes(T).owns(T, 5), member("e").subscribes(T).owns(T, 4, 2));
        Plan plan = plan("g", NOW, planned("a", null, T, 0, 1), planned("b", null, T, 2, 3));
        GroupAssignment result = advised(plan).assign(spec, topics(T, 6));
        assertEquals(Set.of(5), partitionsOf(result, "d", T));
        assertEquals(Set.of(4), partitionsOf(result, "e", T), "2 went to b by the plan; e keeps 4");
    }

    @Test
    void staticMembersFollowThePlanAfterARestart() {
        GroupSpec spec = group(member("fresh-1").instance("w0").subscribes(T), member("fresh-2").instance("w1").subscribes(T));
        Plan plan = plan("g", NOW, planned("gone-1", "w0", T, 0, 1, 2), planned("gone-2", "w1", T, 3));
        GroupAssignment result = advised(plan).assign(spec, topics(T, 4));
        assertEquals(Map.of("fresh-1", Map.of(T, Set.of(0, 1, 2)), "fresh-2", Map.of(T, Set.of(3))), view(result));
    }

    @Test
    void heterogeneousSubscriptionsNeverGiveAPartitionToANonSubscriber() {
        GroupSpec spec = group(member("a").subscribes(T, U), member("b").subscribes(T), member("c").subscribes(U));
        Plan plan = plan("g", NOW, new PlanMember("a", null, Map.of(T, new int[] {0}, U, new int[] {0})),
            new PlanMember("b", null, Map.of(U, new int[] {1})), planned("c", null, U, 2));
        GroupAssignment result = advised(plan).assign(spec, topics(T, 3, U, 4));
        assertComplete(spec, topics(T, 3, U, 4), result);
        assertTrue(partitionsOf(result, "a", U).contains(0));
        assertTrue(partitionsOf(result, "a", T).contains(0));
        assertTrue(partitionsOf(result, "c", U).contains(2));
        assertEquals(Set.of(1, 2), partitionsOf(result, "b", T), "b's planned U-1 is not its to take: b is free for T's rest");
        assertEquals(2, partitionsOf(result, "a", U).size(), "U's rest (1 and 3) is split between a and c");
        assertEquals(2, partitionsOf(result, "c", U).size(), "U's rest (1 and 3) is split between a and c");
        assertTrue(notes.has("unsubscribed:g"));
    }

    @Test
    void noMatchingPlanGivesExactlyUniform() {
        GroupSpec spec = group(member("a").subscribes(T).owns(T, 3), member("b").subscribes(T), member("c").subscribes(T));
        Plan unrelated = plan("other", NOW, planned("x", null, T, 0));
        GroupAssignment expected = new UniformAssignor().assign(spec, topics(T, 7));
        assertEquals(view(expected), view(advised(unrelated).assign(spec, topics(T, 7))));
    }

    @Test
    void anyFailureInsideFallsBackToUniformWithANote() {
        GroupSpec spec = group(member("a").subscribes(T), member("b").subscribes(T));
        AdvisedAssignor broken = new AdvisedAssignor(AdvisedConfig.defaults("unused:9092"),
            () -> { throw new IllegalStateException("index exploded"); }, () -> NOW, notes);
        GroupAssignment expected = new UniformAssignor().assign(spec, topics(T, 5));
        assertEquals(view(expected), view(broken.assign(spec, topics(T, 5))));
        assertTrue(notes.has("assign:java.lang.IllegalStateException"));
    }

    @Test
    void theNameIsConfigurable() {
        AdvisedAssignor assignor = new AdvisedAssignor();
        assertEquals("advised", assignor.name());
        assignor.configure(Map.of("listeners", "PLAINTEXT://127.0.0.1:9092", AdvisedConfig.NAME, "planned"));
        assertEquals("planned", assignor.name());
    }
}
