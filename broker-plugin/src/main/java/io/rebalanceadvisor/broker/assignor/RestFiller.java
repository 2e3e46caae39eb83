package io.rebalanceadvisor.broker.assignor;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.ConsumerGroupPartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The fill step: every subscribed partition the plan did not place goes through Kafka's uniform
 * assignor, run on a reduced group (only those partitions, renumbered; see {@link RestGroupSpec}).
 * Takers of a topic's rest are the subscribers the plan gave nothing, or every subscriber when there
 * is none such, so the plan's balance is disturbed least and no subscribed partition is left out.
 */
final class RestFiller {

    private final ConsumerGroupPartitionAssignor uniform;

    RestFiller(ConsumerGroupPartitionAssignor uniform) {
        this.uniform = uniform;
    }

    GroupAssignment fill(GroupSpec spec, SubscribedTopicDescriber topics, Placement placement) {
        Map<Uuid, RestTopic> rest = new HashMap<>();
        for (Uuid topic : subscribedTopics(spec)) {
            int count = Math.max(topics.numPartitions(topic), 0);
            RestTopic restTopic = RestTopic.of(count, p -> placement.isPlaced(topic, p), placement.placedCount(topic));
            if (restTopic != null) {
                rest.put(topic, restTopic);
            }
        }
        if (rest.isEmpty()) {
            return merge(spec, placement, Map.of(), rest);  // the plan placed every subscribed partition
        }
        Map<Uuid, List<String>> free = new HashMap<>();
        Map<Uuid, List<String>> all = new HashMap<>();
        for (String memberId : spec.memberIds()) {
            boolean planned = placement.hasPartitions(memberId);
            for (Uuid topic : spec.memberSubscription(memberId).subscribedTopicIds()) {
                if (rest.containsKey(topic)) {
                    all.computeIfAbsent(topic, t -> new ArrayList<>()).add(memberId);
                    if (!planned) {
                        free.computeIfAbsent(topic, t -> new ArrayList<>()).add(memberId);
                    }
                }
            }
        }
        Map<String, Set<Uuid>> takers = takers(spec, rest, free, all);
        Map<String, MemberAssignment> filled =
            uniform.assign(new RestGroupSpec(spec, takers, rest), new RestTopicDescriber(topics, rest)).members();
        return merge(spec, placement, filled, rest);
    }

    /** Every topic some member subscribes to (the first member's set when all are the same). */
    private static Set<Uuid> subscribedTopics(GroupSpec spec) {
        if (spec.subscriptionType() == SubscriptionType.HOMOGENEOUS) {
            return spec.memberSubscription(spec.memberIds().iterator().next()).subscribedTopicIds();
        }
        Set<Uuid> union = new HashSet<>();
        for (String memberId : spec.memberIds()) {
            union.addAll(spec.memberSubscription(memberId).subscribedTopicIds());
        }
        return union;
    }

    /** Member → the rest topics it takes, in the group's member order (uniform's tie-breaks follow it). */
    private static Map<String, Set<Uuid>> takers(GroupSpec spec, Map<Uuid, RestTopic> rest,
                                                Map<Uuid, List<String>> free, Map<Uuid, List<String>> all) {
        Map<String, Set<Uuid>> byMember = new HashMap<>();
        for (Uuid topic : rest.keySet()) {
            List<String> takers = free.getOrDefault(topic, all.get(topic));
            for (String memberId : takers) {
                byMember.computeIfAbsent(memberId, m -> new LinkedHashSet<>()).add(topic);
            }
        }
        Map<String, Set<Uuid>> ordered = new LinkedHashMap<>();
        for (String memberId : spec.memberIds()) {
            Set<Uuid> taken = byMember.get(memberId);
            if (taken != null) {
                ordered.put(memberId, taken);
            }
        }
        return ordered;
    }

    /** Each member's planned partitions plus its share of the rest, mapped back to real numbers. */
    private static GroupAssignment merge(GroupSpec spec, Placement placement, Map<String, MemberAssignment> filled,
                                         Map<Uuid, RestTopic> rest) {
        Map<String, MemberAssignment> result = new HashMap<>(spec.memberIds().size() * 2);
        for (String memberId : spec.memberIds()) {
            Map<Uuid, Set<Integer>> planned = placement.partitionsOf(memberId);
            MemberAssignment share = filled.get(memberId);
            if (share == null || share.partitions().isEmpty()) {
                result.put(memberId, new Assigned(planned));  // no copy: nobody changes these maps
                continue;
            }
            Map<Uuid, Set<Integer>> partitions = new HashMap<>();
            planned.forEach((topic, numbers) -> partitions.put(topic, new HashSet<>(numbers)));
            for (Map.Entry<Uuid, Set<Integer>> entry : share.partitions().entrySet()) {
                RestTopic restTopic = rest.get(entry.getKey());
                Set<Integer> target = partitions.computeIfAbsent(entry.getKey(), t -> new HashSet<>());
                for (int virtual : entry.getValue()) {
                    target.add(restTopic.real(virtual));
                }
            }
            result.put(memberId, new Assigned(partitions));
        }
        return new GroupAssignment(result);
    }
}
