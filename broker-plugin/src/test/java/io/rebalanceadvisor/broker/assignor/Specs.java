package io.rebalanceadvisor.broker.assignor;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;
import org.apache.kafka.coordinator.group.modern.Assignment;
import org.apache.kafka.coordinator.group.modern.GroupSpecImpl;
import org.apache.kafka.coordinator.group.modern.MemberSubscriptionAndAssignmentImpl;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Groups as the broker hands them to an assignor, built with Kafka's own GroupSpecImpl (the class the
 * group coordinator passes), and a topic describer that answers like the broker's for known topics.
 */
final class Specs {

    /** Topic id → partition count; unknown topics answer -1, as the broker's describer does. */
    record Topics(Map<Uuid, Integer> counts) implements SubscribedTopicDescriber {
        @Override
        public int numPartitions(Uuid topicId) {
            return counts.getOrDefault(topicId, -1);
        }

        @Override
        public Set<String> racksForPartition(Uuid topicId, int partition) {
            return Set.of();
        }
    }

    /** A member under construction: id, optional instance id, subscription, current partitions. */
    static final class Member {
        final String id;
        String instanceId;
        final Set<Uuid> topics = new java.util.LinkedHashSet<>();
        final Map<Uuid, Set<Integer>> owned = new HashMap<>();

        Member(String id) {
            this.id = id;
        }

        Member instance(String instance) {
            this.instanceId = instance;
            return this;
        }

        Member subscribes(Uuid... topicIds) {
            topics.addAll(List.of(topicIds));
            return this;
        }

        Member owns(Uuid topic, Integer... partitions) {
            owned.computeIfAbsent(topic, t -> new java.util.HashSet<>()).addAll(List.of(partitions));
            return this;
        }
    }

    private Specs() { }

    static Member member(String id) {
        return new Member(id);
    }

    static GroupSpec group(Member... members) {
        return group(List.of(members));
    }

    /** Kafka's GroupSpecImpl for these members, subscription type and owner map computed as the broker does. */
    static GroupSpec group(List<Member> members) {
        Map<String, MemberSubscriptionAndAssignmentImpl> specs = new LinkedHashMap<>();
        Map<Uuid, Map<Integer, String>> owners = new HashMap<>();
        Set<Set<Uuid>> subscriptions = new java.util.HashSet<>();
        for (Member member : members) {
            specs.put(member.id, new MemberSubscriptionAndAssignmentImpl(Optional.empty(),
                Optional.ofNullable(member.instanceId), Set.copyOf(member.topics), new Assignment(member.owned)));
            subscriptions.add(Set.copyOf(member.topics));
            member.owned.forEach((topic, partitions) -> partitions.forEach(
                p -> owners.computeIfAbsent(topic, t -> new HashMap<>()).put(p, member.id)));
        }
        SubscriptionType type = subscriptions.size() <= 1 ? SubscriptionType.HOMOGENEOUS : SubscriptionType.HETEROGENEOUS;
        return new GroupSpecImpl(specs, type, owners);
    }

    static Topics topics(Object... idsAndCounts) {
        Map<Uuid, Integer> counts = new HashMap<>();
        for (int i = 0; i < idsAndCounts.length; i += 2) {
            counts.put((Uuid) idsAndCounts[i], (Integer) idsAndCounts[i + 1]);
        }
        return new Topics(counts);
    }

    static PlanMember planned(String memberId, String instanceId, Uuid topic, int... partitions) {
        return new PlanMember(memberId, instanceId, topic == null ? Map.of() : Map.of(topic, partitions));
    }

    static Plan plan(String group, long publishedAtMs, PlanMember... members) {
        return new Plan(group, "p-" + group, 1, publishedAtMs, List.of(members));
    }

    /** Member → topic → sorted partitions, for readable comparisons. */
    static Map<String, Map<Uuid, Set<Integer>>> view(GroupAssignment assignment) {
        Map<String, Map<Uuid, Set<Integer>>> view = new HashMap<>();
        for (Map.Entry<String, MemberAssignment> entry : assignment.members().entrySet()) {
            Map<Uuid, Set<Integer>> topics = new HashMap<>();
            entry.getValue().partitions().forEach((topic, partitions) -> {
                if (!partitions.isEmpty()) {
                    topics.put(topic, new TreeSet<>(partitions));
                }
            });
            view.put(entry.getKey(), topics);
        }
        return view;
    }

    static Set<Integer> partitionsOf(GroupAssignment assignment, String memberId, Uuid topic) {
        MemberAssignment member = assignment.members().get(memberId);
        return member == null ? Set.of() : new TreeSet<>(member.partitions().getOrDefault(topic, Set.of()));
    }

    /** The rules no assignment may break: each subscribed partition once, to a subscriber, nothing else. */
    static void assertComplete(GroupSpec spec, SubscribedTopicDescriber topics, GroupAssignment assignment) {
        Map<Uuid, Map<Integer, String>> owner = new HashMap<>();
        Set<Uuid> subscribed = new java.util.HashSet<>();
        for (String memberId : spec.memberIds()) {
            Set<Uuid> memberTopics = spec.memberSubscription(memberId).subscribedTopicIds();
            subscribed.addAll(memberTopics);
            MemberAssignment given = assignment.members().get(memberId);
            if (given == null) {
                continue;
            }
            given.partitions().forEach((topic, partitions) -> {
                for (int partition : partitions) {
                    assertTrue(memberTopics.contains(topic), memberId + " got " + topic + " it does not subscribe to");
                    assertTrue(partition >= 0 && partition < topics.numPartitions(topic), "no partition " + partition);
                    String before = owner.computeIfAbsent(topic, t -> new HashMap<>()).put(partition, memberId);
                    if (before != null) {
                        fail("partition " + topic + "-" + partition + " given to " + before + " and " + memberId);
                    }
                }
            });
        }
        for (Uuid topic : subscribed) {
            int count = Math.max(topics.numPartitions(topic), 0);
            assertEquals(count, owner.getOrDefault(topic, Map.of()).size(), "partitions of " + topic + " left out");
        }
        for (String memberId : assignment.members().keySet()) {
            assertTrue(spec.memberIds().contains(memberId), "assignment names unknown member " + memberId);
        }
    }

    /** Notes kept for assertions. */
    static final class Recorded implements Notes {
        final List<String> keys = new ArrayList<>();
        final List<String> messages = new ArrayList<>();

        @Override
        public void note(String key, String message) {
            keys.add(key);
            messages.add(message);
        }

        boolean has(String keyPrefix) {
            return keys.stream().anyMatch(k -> k.startsWith(keyPrefix));
        }
    }
}
