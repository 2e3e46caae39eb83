package io.rebalanceadvisor.broker.assignor;

import org.apache.kafka.common.Uuid;

import java.util.BitSet;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;

/**
 * What the plan placed: each planned member's partitions, and per topic which partitions are taken.
 * A member's sets may be the very sets of its current assignment when the plan leaves them as they
 * are (as Kafka's own assignors return unchanged assignments): nobody may modify them.
 */
final class Placement {

    private final Map<String, Map<Uuid, Set<Integer>>> byMember = new HashMap<>(1024);
    private final Map<Uuid, BitSet> placed = new HashMap<>();

    /** The partitions of {@code topic} the plan has placed so far; the caller sets the ones it places. */
    BitSet taken(Uuid topic) {
        return placed.computeIfAbsent(topic, t -> new BitSet());
    }

    /** Records a member's planned partitions, already set in {@link #taken}; empty maps are dropped. */
    void give(String memberId, Map<Uuid, Set<Integer>> partitions) {
        if (!partitions.isEmpty()) {
            byMember.put(memberId, partitions);
        }
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
