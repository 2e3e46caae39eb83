package io.rebalanceadvisor.broker.assignor;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;

import static io.rebalanceadvisor.broker.assignor.Specs.assertComplete;
import static io.rebalanceadvisor.broker.assignor.Specs.view;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Property tests on random groups (fixed seeds): with no plan for the group the result is uniform's,
 * exactly; with a random plan the invariants hold and every valid planned partition is where the plan says.
 */
class UniformEquivalenceTest {

    private static final long NOW = 1_800_000_000_000L;
    private static final int CASES = 300;

    /** A random group: members, topics, subscriptions (homogeneous half the time), current owners. */
    private record Case(GroupSpec spec, Specs.Topics topics, List<Specs.Member> members, List<Uuid> topicIds) { }

    private static Case randomCase(Random random) {
        List<Uuid> topicIds = new ArrayList<>();
        Map<Uuid, Integer> counts = new HashMap<>();
        for (int t = 0, n = 1 + random.nextInt(4); t < n; t++) {
            Uuid id = new Uuid(random.nextLong(), random.nextLong());
            topicIds.add(id);
            counts.put(id, random.nextInt(31));
        }
        boolean homogeneous = random.nextBoolean();
        List<Specs.Member> members = new ArrayList<>();
        for (int m = 0, n = 1 + random.nextInt(40); m < n; m++) {
            Specs.Member member = Specs.member("m" + m + "-" + random.nextInt(1000));
            if (random.nextInt(4) == 0) {
                member.instance("i" + m);
            }
            for (Uuid topic : topicIds) {
                if (homogeneous || random.nextInt(3) > 0) {
                    member.subscribes(topic);
                }
            }
            members.add(member);
        }
        Map<Uuid, Map<Integer, Boolean>> taken = new HashMap<>();
        for (Specs.Member member : members) {  // current owners: some partitions, at most one owner each
            for (Uuid topic : topicIds) {
                for (int p = 0; p < counts.get(topic); p++) {
                    if (random.nextInt(members.size() + 1) == 0
                        && taken.computeIfAbsent(topic, t -> new HashMap<>()).putIfAbsent(p, true) == null) {
                        member.owns(topic, p);
                    }
                }
            }
        }
        return new Case(Specs.group(members), new Specs.Topics(counts), members, topicIds);
    }

    private static AdvisedAssignor advised(List<Plan> plans, Specs.Recorded notes) {
        PlanIndex index = PlanIndex.of(plans);
        return new AdvisedAssignor(AdvisedConfig.defaults("unused:9092"), () -> index, () -> NOW, notes);
    }

    @Test
    void withNoPlanTheResultIsUniformsExactly() {
        for (int seed = 0; seed < CASES; seed++) {
            Case c = randomCase(new Random(seed));
            GroupAssignment expected;
            try {
                expected = new UniformAssignor().assign(c.spec(), c.topics());
            } catch (RuntimeException uniformRefused) {
                continue;  // the same spec would make advised throw the same way: nothing to compare
            }
            Plan otherGroup = Specs.plan("other", NOW, Specs.planned("someone-else", "i-elsewhere", c.topicIds().get(0), 0));
            for (List<Plan> plans : List.of(List.<Plan>of(), List.of(otherGroup))) {
                GroupAssignment actual = advised(plans, new Specs.Recorded()).assign(c.spec(), c.topics());
                assertEquals(view(expected), view(actual), "seed " + seed);
                assertEquals(expected.members().keySet(), actual.members().keySet(), "seed " + seed);
            }
        }
    }

    @Test
    void withARandomPlanTheRulesHoldAndValidPlannedPartitionsAreApplied() {
        int applied = 0;
        for (int seed = 0; seed < CASES; seed++) {
            Random random = new Random(1_000 + seed);
            Case c = randomCase(random);
            Plan plan = randomPlan(random, c);
            Specs.Recorded notes = new Specs.Recorded();
            GroupAssignment result = advised(List.of(plan), notes).assign(c.spec(), c.topics());
            assertComplete(c.spec(), c.topics(), result);
            assertTrue(notes.keys.stream().noneMatch(k -> k.startsWith("assign:")), "seed " + seed + ": " + notes.messages);
            PlanMatcher matcher = new PlanMatcher(AdvisedConfig.DEFAULT_MAX_AGE_MS, AdvisedConfig.DEFAULT_MIN_PRESENT);
            var match = matcher.match(c.spec(), PlanIndex.of(List.of(plan)), NOW, Notes.NONE);
            if (match.isEmpty()) {
                continue;
            }
            applied++;
            Placement placement = PlanApplier.apply(match.get(), c.spec(), c.topics(), Notes.NONE);
            String label = "seed " + (1_000 + seed);
            for (String memberId : c.spec().memberIds()) {
                placement.partitionsOf(memberId).forEach((topic, partitions) -> assertTrue(
                    Specs.partitionsOf(result, memberId, topic).containsAll(partitions), label));
            }
        }
        assertTrue(applied > CASES / 4, "only " + applied + " random plans applied: the property is not exercised");
    }

    /** Most present members named (some by instance id), some absent ones, some invalid partitions. */
    private static Plan randomPlan(Random random, Case c) {
        List<PlanMember> members = new ArrayList<>();
        for (Specs.Member member : c.members()) {
            if (random.nextInt(5) == 0) {
                continue;
            }
            Map<Uuid, int[]> partitions = new HashMap<>();
            for (Uuid topic : c.topicIds()) {
                int count = c.topics().numPartitions(topic);
                partitions.put(topic, random.ints(random.nextInt(4), -1, count + 2).toArray());
            }
            members.add(new PlanMember(member.id, member.instanceId, partitions));
        }
        for (int gone = random.nextInt(3); gone > 0; gone--) {
            members.add(new PlanMember("gone-" + gone, null, Map.of(c.topicIds().get(0), new int[] {0})));
        }
        return new Plan("g", "p", 1, NOW - random.nextInt(1000), members);
    }

    @Test
    void emptyGroupsAndEmptyTopicsAreFine() {
        Uuid topic = Uuid.randomUuid();
        GroupSpec spec = Specs.group(Specs.member("a").subscribes(topic));
        Plan plan = Specs.plan("g", NOW, Specs.planned("a", null, topic, 0));
        GroupAssignment result = advised(List.of(plan), new Specs.Recorded()).assign(spec, Specs.topics(topic, 0));
        assertEquals(Map.of("a", Map.of()), view(result));
        assertEquals(Set.of(), advised(List.of(plan), new Specs.Recorded())
            .assign(Specs.group(List.of()), Specs.topics(topic, 3)).members().keySet());
    }
}
