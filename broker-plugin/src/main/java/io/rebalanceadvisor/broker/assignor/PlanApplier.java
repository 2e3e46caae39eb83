package io.rebalanceadvisor.broker.assignor;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;

import java.util.BitSet;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * Gives each present member the plan names the plan's partitions among those it may have: a topic
 * it subscribes to and a partition that exists. Whatever else the plan says falls back to the fill
 * step, with one note per kind of problem per plan. Where the plan keeps a member's current
 * partitions, the current sets are returned rather than copied, and the loops allocate little:
 * assign() of a plan hit is held to twice uniform's cost (bench/broker_assignor.py).
 */
final class PlanApplier {

    private static final Set<Integer> NONE = Collections.emptySet();

    private final Plan plan;
    private final SubscribedTopicDescriber topics;
    private final Notes notes;
    private final Placement placement = new Placement();
    /** Topic id → its partition count and what the plan has placed of it: one lookup per topic. */
    private final Map<Uuid, TopicState> states = new HashMap<>();
    /** Reused buffers: the loops below run once per planned partition and should not allocate. */
    private int[] keep = new int[64];
    private Object[] chosen = new Object[16];

    private record TopicState(int count, BitSet taken) { }

    private PlanApplier(Plan plan, SubscribedTopicDescriber topics, Notes notes) {
        this.plan = plan;
        this.topics = topics;
        this.notes = notes;
    }

    static Placement apply(PlanMatch match, GroupSpec spec, SubscribedTopicDescriber topics, Notes notes) {
        PlanApplier applier = new PlanApplier(match.plan(), topics, notes);
        for (String memberId : spec.memberIds()) {  // the group's order, as uniform walks it: cache-friendly
            PlanMember member = match.members().get(memberId);
            if (member != null) {
                applier.member(spec, memberId, member);
            }
        }
        return applier.placement;
    }

    private void member(GroupSpec spec, String memberId, PlanMember member) {
        Set<Uuid> subscribed = spec.memberSubscription(memberId).subscribedTopicIds();
        Map<Uuid, Set<Integer>> current = spec.memberAssignment(memberId).partitions();
        Uuid[] planTopics = member.topicArray();
        if (chosen.length < planTopics.length) {
            chosen = new Object[planTopics.length * 2];
        }
        boolean same = true;
        int given = 0;
        for (int i = 0; i < planTopics.length; i++) {
            Uuid topic = planTopics[i];
            Set<Integer> now = current.get(topic);
            Set<Integer> part = subscribed.contains(topic) ? topicPart(member, topic, member.partitionArrays()[i], now)
                : unsubscribed(member, topic);
            chosen[i] = part;
            given += part.isEmpty() ? 0 : 1;
            same &= part.isEmpty() ? now == null : part == now;
        }
        placement.give(memberId, same && given == current.size() ? current : mapOf(planTopics, chosen));
    }

    @SuppressWarnings("unchecked")
    private static Map<Uuid, Set<Integer>> mapOf(Uuid[] planTopics, Object[] chosen) {
        Map<Uuid, Set<Integer>> map = new HashMap<>();
        for (int i = 0; i < planTopics.length; i++) {
            Set<Integer> part = (Set<Integer>) chosen[i];
            if (!part.isEmpty()) {
                map.put(planTopics[i], part);
            }
        }
        return map;
    }

    /** The partitions of one subscribed topic the member gets; {@code current} itself if they are equal. */
    private Set<Integer> topicPart(PlanMember member, Uuid topic, int[] planned, Set<Integer> current) {
        TopicState state = states.computeIfAbsent(topic, t -> new TopicState(topics.numPartitions(t), placement.taken(t)));
        int count = state.count();
        if (count < 0) {
            note("unknown-topic", "topic id " + topic + " is not in the cluster's metadata");
            return NONE;
        }
        BitSet taken = state.taken();
        int kept = 0;
        boolean sameAsCurrent = current != null;
        if (keep.length < planned.length) {
            keep = new int[planned.length * 2];
        }
        for (int partition : planned) {
            if (partition < 0 || partition >= count) {
                note("unknown-partition", "partition " + partition + " of topic id " + topic + " does not exist "
                    + "(the topic has " + count + ")");
            } else if (taken.get(partition)) {
                note("duplicate", "partition " + partition + " of topic id " + topic + " is given to more than "
                    + "one member; the first keeps it");
            } else {
                taken.set(partition);
                keep[kept++] = partition;
                sameAsCurrent = sameAsCurrent && current.contains(partition);
            }
        }
        if (sameAsCurrent && current.size() == kept) {
            return current;
        }
        Set<Integer> result = new HashSet<>(Math.max(4, kept * 2));
        for (int i = 0; i < kept; i++) {
            result.add(keep[i]);
        }
        return result;
    }

    private Set<Integer> unsubscribed(PlanMember member, Uuid topic) {
        note("unsubscribed", member.label() + " does not subscribe to topic id " + topic);
        return NONE;
    }

    private void note(String kind, String detail) {
        notes.note(kind + ":" + plan.group() + ":" + plan.planId(),
            plan.label() + ": " + detail + "; that part falls back to uniform");
    }
}
