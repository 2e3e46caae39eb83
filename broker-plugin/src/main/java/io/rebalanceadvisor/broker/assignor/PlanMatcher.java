package io.rebalanceadvisor.broker.assignor;

import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;

import java.util.BitSet;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Finds the plan of a group from its members alone (the assignor is not told the group id): the
 * plan most of whose members are present, each matched by instance id when the plan names one,
 * else by member id. The best plan is refused when it is older than the age bound or when no more
 * than the configured fraction of its members is present; then the group gets uniform's result.
 */
final class PlanMatcher {

    private final long maxAgeMs;
    private final double minPresentFraction;

    PlanMatcher(long maxAgeMs, double minPresentFraction) {
        this.maxAgeMs = maxAgeMs;
        this.minPresentFraction = minPresentFraction;
    }

    Optional<PlanMatch> match(GroupSpec spec, PlanIndex index, long nowMs, Notes notes) {
        if (index.isEmpty()) {
            return Optional.empty();
        }
        Map<Plan, BitSet> present = null;
        boolean instances = index.hasInstanceIds();
        for (String memberId : spec.memberIds()) {  // the miss path: one lookup per member, no allocation
            List<PlanIndex.MemberRef> refs = instances ? refs(spec, index, memberId) : index.byMemberOrNull(memberId);
            if (refs == null || refs.isEmpty()) {
                continue;
            }
            present = present == null ? new IdentityHashMap<>() : present;
            for (int i = 0; i < refs.size(); i++) {
                PlanIndex.MemberRef ref = refs.get(i);
                present.computeIfAbsent(ref.plan(), p -> new BitSet()).set(ref.memberIndex());
            }
        }
        if (present == null) {
            return Optional.empty();
        }
        Plan best = null;
        for (Map.Entry<Plan, BitSet> entry : present.entrySet()) {
            if (best == null || better(entry.getKey(), entry.getValue().cardinality(), best,
                present.get(best).cardinality())) {
                best = entry.getKey();
            }
        }
        if (best == null || !eligible(best, present.get(best).cardinality(), nowMs, notes)) {
            return Optional.empty();
        }
        return Optional.of(new PlanMatch(best, bind(spec, index, best)));
    }

    /** More members present wins; then the larger share of the plan; then the newer plan. */
    private static boolean better(Plan plan, int count, Plan best, int bestCount) {
        if (count != bestCount) {
            return count > bestCount;
        }
        long share = (long) count * best.members().size() - (long) bestCount * plan.members().size();
        if (share != 0) {
            return share > 0;
        }
        return plan.publishedAtMs() > best.publishedAtMs();
    }

    private boolean eligible(Plan plan, int presentCount, long nowMs, Notes notes) {
        long age = nowMs - plan.publishedAtMs();
        if (age > maxAgeMs) {
            notes.note("stale:" + plan.group() + ":" + plan.planId(), plan.label() + " is " + age / 1000
                + " s old, past the bound of " + maxAgeMs / 1000 + " s; the group gets uniform's assignment");
            return false;
        }
        if (presentCount <= minPresentFraction * plan.members().size()) {
            notes.note("absent:" + plan.group() + ":" + plan.planId(), plan.label() + ": only " + presentCount
                + " of its " + plan.members().size() + " members are in the group; the group gets uniform's "
                + "assignment");
            return false;
        }
        return true;
    }

    /** Present member id → its plan member, for the chosen plan (each plan member bound once). */
    private static Map<String, PlanMember> bind(GroupSpec spec, PlanIndex index, Plan plan) {
        Map<String, PlanMember> bound = new HashMap<>(plan.members().size() * 2);
        BitSet taken = new BitSet();
        for (String memberId : spec.memberIds()) {
            for (PlanIndex.MemberRef ref : refs(spec, index, memberId)) {
                if (ref.plan() == plan && !taken.get(ref.memberIndex())) {
                    taken.set(ref.memberIndex());
                    bound.put(memberId, ref.member());
                    break;
                }
            }
        }
        return bound;
    }

    /** The plan members a present member may be: by its instance id first, then by its member id. */
    private static List<PlanIndex.MemberRef> refs(GroupSpec spec, PlanIndex index, String memberId) {
        if (!index.hasInstanceIds()) {
            return index.byMember(memberId);
        }
        Optional<String> instanceId = spec.memberSubscription(memberId).instanceId();
        List<PlanIndex.MemberRef> byInstance = instanceId.map(index::byInstance).orElse(List.of());
        List<PlanIndex.MemberRef> byMember = index.byMember(memberId);
        if (byInstance.isEmpty()) {
            return byMember;
        }
        if (byMember.isEmpty()) {
            return byInstance;
        }
        return java.util.stream.Stream.concat(byInstance.stream(), byMember.stream()).toList();
    }
}
