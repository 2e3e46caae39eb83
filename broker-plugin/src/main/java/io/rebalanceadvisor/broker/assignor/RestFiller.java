package io.rebalanceadvisor.broker.assignor;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.ConsumerGroupPartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;

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
        Map<Uuid, List<String>> free = new HashMap<>();
        Map<Uuid, List<String>> all = new HashMap<>();
        for (String memberId : spec.memberIds()) {
            boolean planned = placement.hasPartitions(memberId);
            for (Uuid topic : spec.memberSubscription(memberId).subscribedTopicIds()) {
                all.computeIfAbsent(topic, t -> new ArrayList<>()).add(memberId);
                if (!planned) {
                    free.computeIfAbsent(topic, t -> new ArrayList<>()).add(memberId);
                }
            }
        }
        Map<Uuid, RestTopic> rest = new HashMap<>();
        for (Uuid topic : all.keySet()) {
            int count = Math.max(topics.numPartitions(topic), 0);
            RestTopic restTopic = RestTopic.of(count, p -> placement.isPlaced(topic, p), placement.placedCount(topic));
            if (restTopic != null) {
                rest.put(topic, restTopic);
            }
        }
        Map<String, Set<Uuid>> takers = takers(spec, rest, free, all);
        Map<String, MemberAssignment> filled = takers.isEmpty() ? Map.of()
            : uniform.assign(new RestGroupSpec(spec, takers, rest), new RestTopicDescriber(topics, rest)).members();
        return merge(spec, placement, filled, rest);
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
        Map<String, MemberAssignment> result = new HashMap<>();
        for (String memberId : spec.memberIds()) {
            Map<Uuid, Set<Integer>> partitions = new HashMap<>();
            placement.partitionsOf(memberId).forEach((topic, numbers) -> partitions.put(topic, new HashSet<>(numbers)));
            MemberAssignment share = filled.get(memberId);
            if (share != null) {
                for (Map.Entry<Uuid, Set<Integer>> entry : share.partitions().entrySet()) {
                    RestTopic restTopic = rest.get(entry.getKey());
                    Set<Integer> target = partitions.computeIfAbsent(entry.getKey(), t -> new HashSet<>());
                    for (int virtual : entry.getValue()) {
                        target.add(restTopic.real(virtual));
                    }
                }
            }
            result.put(memberId, new Assigned(partitions));
        }
        return new GroupAssignment(result);
    }
}
