package io.rebalanceadvisor.broker.assignor;

import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The plans in force, looked up by member: the immutable value the reader swaps in whole, so an
 * assign() call only reads (docs/operations/broker-plugin.md, "How it works").
 */
public final class PlanIndex {

    /** One plan member a lookup found. */
    public record MemberRef(Plan plan, int memberIndex) {
        PlanMember member() {
            return plan.members().get(memberIndex);
        }
    }

    public static final PlanIndex EMPTY = new PlanIndex(List.of());

    private final List<Plan> plans;
    private final Map<String, List<MemberRef>> byInstance = new HashMap<>();
    private final Map<String, List<MemberRef>> byMember = new HashMap<>();

    private PlanIndex(Collection<Plan> plans) {
        this.plans = List.copyOf(plans);
        for (Plan plan : this.plans) {
            for (int i = 0; i < plan.members().size(); i++) {
                PlanMember member = plan.members().get(i);
                MemberRef ref = new MemberRef(plan, i);
                if (member.instanceId() != null) {
                    byInstance.merge(member.instanceId(), List.of(ref), PlanIndex::concat);
                } else {
                    byMember.merge(member.memberId(), List.of(ref), PlanIndex::concat);
                }
            }
        }
    }

    public static PlanIndex of(Collection<Plan> plans) {
        return plans.isEmpty() ? EMPTY : new PlanIndex(plans);
    }

    /** False when no plan names an instance id: lookups by instance id can be skipped. */
    boolean hasInstanceIds() {
        return !byInstance.isEmpty();
    }

    /** Plan members with this static instance id (several groups may reuse one). */
    List<MemberRef> byInstance(String instanceId) {
        return byInstance.getOrDefault(instanceId, List.of());
    }

    /** Like {@link #byMember}, null when none: the lookup assign() makes for every member. */
    List<MemberRef> byMemberOrNull(String memberId) {
        return byMember.get(memberId);
    }

    /** Plan members (without an instance id) with this member id. */
    List<MemberRef> byMember(String memberId) {
        return byMember.getOrDefault(memberId, List.of());
    }

    public List<Plan> plans() {
        return plans;
    }

    public boolean isEmpty() {
        return plans.isEmpty();
    }

    private static List<MemberRef> concat(List<MemberRef> a, List<MemberRef> b) {
        return java.util.stream.Stream.concat(a.stream(), b.stream()).toList();
    }
}
