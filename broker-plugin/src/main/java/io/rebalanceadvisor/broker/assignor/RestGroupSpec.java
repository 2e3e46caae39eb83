package io.rebalanceadvisor.broker.assignor;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.MemberSubscription;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;

import java.util.BitSet;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * The group as uniform sees it in the fill step: only the members that take the rest, each
 * subscribed to the rest topics it takes, each keeping (for stickiness) the rest partitions it owns
 * now, in the renumbering of {@link RestTopic}. Assignments are unmodifiable maps, as uniform requires.
 */
final class RestGroupSpec implements GroupSpec {

    private record Subscription(Optional<String> rackId, Optional<String> instanceId, Set<Uuid> subscribedTopicIds)
        implements MemberSubscription { }

    private final Map<String, Subscription> members = new java.util.LinkedHashMap<>();
    private final Map<String, MemberAssignment> current = new HashMap<>();
    private final Map<Uuid, BitSet> assigned = new HashMap<>();
    private final SubscriptionType type;

    /** @param takers member → the rest topics it takes, in the group's member order */
    RestGroupSpec(GroupSpec group, Map<String, Set<Uuid>> takers, Map<Uuid, RestTopic> rest) {
        Set<Uuid> first = null;
        boolean same = true;
        for (Map.Entry<String, Set<Uuid>> taker : takers.entrySet()) {
            MemberSubscription original = group.memberSubscription(taker.getKey());
            Set<Uuid> topics = Collections.unmodifiableSet(taker.getValue());
            members.put(taker.getKey(), new Subscription(original.rackId(), original.instanceId(), topics));
            current.put(taker.getKey(), owned(group.memberAssignment(taker.getKey()), topics, rest));
            same &= first == null || first.equals(topics);
            first = first == null ? topics : first;
        }
        type = same ? SubscriptionType.HOMOGENEOUS : SubscriptionType.HETEROGENEOUS;
    }

    /** The rest partitions the member owns now, renumbered, among the topics it takes. */
    private MemberAssignment owned(MemberAssignment now, Set<Uuid> topics, Map<Uuid, RestTopic> rest) {
        Map<Uuid, Set<Integer>> kept = new HashMap<>();
        for (Map.Entry<Uuid, Set<Integer>> entry : now.partitions().entrySet()) {
            Uuid topic = entry.getKey();
            if (!topics.contains(topic)) {
                continue;
            }
            RestTopic restTopic = rest.get(topic);
            BitSet taken = assigned.computeIfAbsent(topic, t -> new BitSet());
            Set<Integer> numbers = new HashSet<>();
            for (int partition : entry.getValue()) {
                int virtual = restTopic.virtual(partition);
                if (virtual >= 0 && !taken.get(virtual)) {
                    taken.set(virtual);
                    numbers.add(virtual);
                }
            }
            if (!numbers.isEmpty()) {
                kept.put(topic, numbers);
            }
        }
        return new Assigned(kept.isEmpty() ? Collections.emptyMap() : Collections.unmodifiableMap(kept));
    }

    @Override
    public Collection<String> memberIds() {
        return members.keySet();
    }

    @Override
    public SubscriptionType subscriptionType() {
        return type;
    }

    @Override
    public boolean isPartitionAssigned(Uuid topicId, int partitionId) {
        BitSet taken = assigned.get(topicId);
        return taken != null && taken.get(partitionId);
    }

    @Override
    public boolean isPartitionAssignable(Uuid topicId, int partitionId) {
        return true;
    }

    @Override
    public MemberSubscription memberSubscription(String memberId) {
        Subscription subscription = members.get(memberId);
        if (subscription == null) {
            throw new IllegalArgumentException("Member Id " + memberId + " not found.");
        }
        return subscription;
    }

    @Override
    public MemberAssignment memberAssignment(String memberId) {
        return current.getOrDefault(memberId, new Assigned(Collections.emptyMap()));
    }
}
