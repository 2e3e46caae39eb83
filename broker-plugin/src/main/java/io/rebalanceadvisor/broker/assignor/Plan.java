package io.rebalanceadvisor.broker.assignor;

import java.util.List;

/**
 * One group's plan as the publisher wrote it (docs/reference/broker-plan-record.md), already
 * checked: each member has a member id or an instance id, each partition a topic id.
 */
public record Plan(String group, String planId, long epoch, long publishedAtMs, List<PlanMember> members) {

    public Plan {
        members = List.copyOf(members);
    }

    /** A short name for log lines. */
    String label() {
        return "plan " + planId + " of group " + group;
    }
}
