package io.rebalanceadvisor.broker.assignor;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;

import java.util.Map;
import java.util.Set;

/**
 * Gives each present member the plan names the plan's partitions among those it may have: a topic
 * it subscribes to and a partition that exists. Whatever else the plan says falls back to the fill
 * step, with one note per kind of problem per plan.
 */
final class PlanApplier {

    private PlanApplier() { }

    static Placement apply(PlanMatch match, GroupSpec spec, SubscribedTopicDescriber topics, Notes notes) {
        Placement placement = new Placement();
        Plan plan = match.plan();
        for (Map.Entry<String, PlanMember> entry : match.members().entrySet()) {
            String memberId = entry.getKey();
            Set<Uuid> subscribed = spec.memberSubscription(memberId).subscribedTopicIds();
            for (Map.Entry<Uuid, int[]> planned : entry.getValue().partitions().entrySet()) {
                Uuid topic = planned.getKey();
                if (!subscribed.contains(topic)) {
                    note(notes, plan, "unsubscribed", entry.getValue().label() + " does not subscribe to topic id "
                        + topic);
                    continue;
                }
                int count = topics.numPartitions(topic);
                if (count < 0) {
                    note(notes, plan, "unknown-topic", "topic id " + topic + " is not in the cluster's metadata");
                    continue;
                }
                placeAll(placement, memberId, topic, planned.getValue(), count, notes, plan);
            }
        }
        return placement;
    }

    private static void placeAll(Placement placement, String memberId, Uuid topic, int[] partitions, int count,
                                 Notes notes, Plan plan) {
        for (int partition : partitions) {
            if (partition < 0 || partition >= count) {
                note(notes, plan, "unknown-partition", "partition " + partition + " of topic id " + topic
                    + " does not exist (the topic has " + count + ")");
            } else if (!placement.place(memberId, topic, partition)) {
                note(notes, plan, "duplicate", "partition " + partition + " of topic id " + topic
                    + " is given to more than one member; the first keeps it");
            }
        }
    }

    private static void note(Notes notes, Plan plan, String kind, String detail) {
        notes.note(kind + ":" + plan.group() + ":" + plan.planId(),
            plan.label() + ": " + detail + "; that part falls back to uniform");
    }
}
