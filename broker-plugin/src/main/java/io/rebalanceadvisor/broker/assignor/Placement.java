package io.rebalanceadvisor.broker.assignor;

import org.apache.kafka.common.Uuid;

import java.util.BitSet;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/** What the plan placed: each planned member's partitions, and per topic which partitions are taken. */
final class Placement {

    private final Map<String, Map<Uuid, Set<Integer>>> byMember = new HashMap<>();
    private final Map<Uuid, BitSet> placed = new HashMap<>();

    /** Gives {@code partition} to {@code memberId}; false when the plan already gave it to someone. */
    boolean place(String memberId, Uuid topic, int partition) {
        BitSet taken = placed.computeIfAbsent(topic, t -> new BitSet());
        if (taken.get(partition)) {
            return false;
        }
        taken.set(partition);
        byMember.computeIfAbsent(memberId, m -> new HashMap<>())
            .computeIfAbsent(topic, t -> new HashSet<>()).add(partition);
        return true;
    }

    boolean isPlaced(Uuid topic, int partition) {
        BitSet taken = placed.get(topic);
        return taken != null && taken.get(partition);
    }

    /** How many partitions of {@code topic} the plan placed. */
    int placedCount(Uuid topic) {
        BitSet taken = placed.get(topic);
        return taken == null ? 0 : taken.cardinality();
    }

    /** True when the plan gave this member at least one partition. */
    boolean hasPartitions(String memberId) {
        return byMember.containsKey(memberId);
    }

    /** The member's planned partitions (empty when it has none); the caller must not change it. */
    Map<Uuid, Set<Integer>> partitionsOf(String memberId) {
        return byMember.getOrDefault(memberId, Map.of());
    }
}
