package io.rebalanceadvisor.broker.assignor;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Optional;

import static io.rebalanceadvisor.broker.assignor.Specs.group;
import static io.rebalanceadvisor.broker.assignor.Specs.member;
import static io.rebalanceadvisor.broker.assignor.Specs.plan;
import static io.rebalanceadvisor.broker.assignor.Specs.planned;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class PlanMatcherTest {

    private static final Uuid T = Uuid.randomUuid();
    private static final long NOW = 1_800_000_000_000L;
    private final PlanMatcher matcher = new PlanMatcher(3_600_000L, 0.5);

    private static GroupSpec members(String... ids) {
        return group(java.util.Arrays.stream(ids).map(id -> member(id).subscribes(T)).toList());
    }

    @Test
    void matchesByMemberId() {
        Plan plan = plan("g", NOW, planned("a", null, T, 0), planned("b", null, T, 1));
        Optional<PlanMatch> match = matcher.match(members("a", "b"), PlanIndex.of(List.of(plan)), NOW, Notes.NONE);
        assertTrue(match.isPresent());
        assertEquals(plan, match.get().plan());
        assertEquals("a", match.get().members().get("a").memberId());
    }

    @Test
    void staticMembersAreMatchedByInstanceIdAcrossNewMemberIds() {
        Plan plan = plan("g", NOW, planned("old-a", "worker-0", T, 0), planned("old-b", "worker-1", T, 1));
        GroupSpec spec = group(member("new-a").instance("worker-0").subscribes(T),
            member("new-b").instance("worker-1").subscribes(T));
        PlanMatch match = matcher.match(spec, PlanIndex.of(List.of(plan)), NOW, Notes.NONE).orElseThrow();
        assertEquals("worker-0", match.members().get("new-a").instanceId());
        assertEquals("worker-1", match.members().get("new-b").instanceId());
    }

    @Test
    void aPlanNamingAnInstanceIdIsNotMatchedByMemberIdAlone() {
        Plan plan = plan("g", NOW, planned("a", "worker-0", T, 0), planned("b", "worker-1", T, 1));
        assertFalse(matcher.match(members("a", "b"), PlanIndex.of(List.of(plan)), NOW, Notes.NONE).isPresent());
    }

    @Test
    void thePlanWithMostMembersPresentWins() {
        Plan mine = plan("mine", NOW - 10, planned("a", "w0", T, 0), planned("b", "w1", T, 1), planned("c", "w2", T, 2));
        Plan other = plan("other", NOW, planned("x", "w0", T, 0), planned("y", "w1", T, 1));
        GroupSpec spec = group(member("1").instance("w0").subscribes(T), member("2").instance("w1").subscribes(T),
            member("3").instance("w2").subscribes(T));
        PlanMatch match = matcher.match(spec, PlanIndex.of(List.of(other, mine)), NOW, Notes.NONE).orElseThrow();
        assertEquals("mine", match.plan().group());
    }

    @Test
    void onEqualCountsTheLargerShareThenTheNewerPlanWins() {
        Plan small = plan("small", NOW - 100, planned("x", "w0", T, 0), planned("y", "w1", T, 1));
        Plan big = plan("big", NOW, planned("a", "w0", T, 0), planned("b", "w1", T, 1), planned("c", "w9", T, 2));
        GroupSpec spec = group(member("1").instance("w0").subscribes(T), member("2").instance("w1").subscribes(T));
        assertEquals("small", matcher.match(spec, PlanIndex.of(List.of(big, small)), NOW, Notes.NONE)
            .orElseThrow().plan().group());
        Plan older = plan("older", NOW - 100, planned("x", "w0", T, 0), planned("y", "w1", T, 1));
        Plan newer = plan("newer", NOW - 50, planned("a", "w0", T, 0), planned("b", "w1", T, 1));
        assertEquals("newer", matcher.match(spec, PlanIndex.of(List.of(older, newer)), NOW, Notes.NONE)
            .orElseThrow().plan().group());
    }

    @Test
    void aPlanOlderThanTheBoundIsIgnoredWithANote() {
        Plan plan = plan("g", NOW - 3_600_001L, planned("a", null, T, 0), planned("b", null, T, 1));
        Specs.Recorded notes = new Specs.Recorded();
        assertFalse(matcher.match(members("a", "b"), PlanIndex.of(List.of(plan)), NOW, notes).isPresent());
        assertTrue(notes.has("stale:g"), notes.keys.toString());
        Plan fresh = plan("g", NOW - 3_600_000L, planned("a", null, T, 0), planned("b", null, T, 1));
        assertTrue(matcher.match(members("a", "b"), PlanIndex.of(List.of(fresh)), NOW, notes).isPresent());
    }

    @Test
    void moreThanTheFractionOfThePlansMembersMustBePresent() {
        Plan plan = plan("g", NOW, planned("a", null, T, 0), planned("b", null, T, 1), planned("c", null, T, 2),
            planned("d", null, T, 3));
        PlanIndex index = PlanIndex.of(List.of(plan));
        Specs.Recorded notes = new Specs.Recorded();
        assertFalse(matcher.match(members("a", "b", "new"), index, NOW, notes).isPresent(), "2 of 4 is not more than half");
        assertTrue(notes.has("absent:g"));
        assertTrue(matcher.match(members("a", "b", "c"), index, NOW, notes).isPresent(), "3 of 4 is");
    }

    @Test
    void noPlansNoMatch() {
        assertFalse(matcher.match(members("a"), PlanIndex.EMPTY, NOW, Notes.NONE).isPresent());
        Plan unrelated = plan("g", NOW, planned("x", null, T, 0));
        assertFalse(matcher.match(members("a"), PlanIndex.of(List.of(unrelated)), NOW, Notes.NONE).isPresent());
    }
}
