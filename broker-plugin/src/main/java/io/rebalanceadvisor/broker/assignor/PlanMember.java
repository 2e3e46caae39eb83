package io.rebalanceadvisor.broker.assignor;

import org.apache.kafka.common.Uuid;

import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * One member of a plan and the partitions the plan gives it. It is matched by {@code instanceId}
 * when set (static members keep it across restarts), else by {@code memberId}. The partitions are
 * also kept as plain arrays, which assign() walks without allocating (bench/broker_assignor.py).
 */
public final class PlanMember {

    private final String memberId;
    private final String instanceId;
    private final Map<Uuid, int[]> partitions;
    private final Uuid[] topicArray;
    private final int[][] partitionArrays;

    /** @param partitions topic id → partition numbers (sorted and made distinct here) */
    public PlanMember(String memberId, String instanceId, Map<Uuid, int[]> partitions) {
        this.memberId = memberId;
        this.instanceId = instanceId;
        Map<Uuid, int[]> copy = new LinkedHashMap<>();
        partitions.forEach((topic, numbers) -> copy.put(topic, Arrays.stream(numbers).sorted().distinct().toArray()));
        this.partitions = Collections.unmodifiableMap(copy);
        this.topicArray = copy.keySet().toArray(Uuid[]::new);
        this.partitionArrays = copy.values().toArray(int[][]::new);
    }

    public String memberId() {
        return memberId;
    }

    public String instanceId() {
        return instanceId;
    }

    /** Topic id → sorted, distinct partition numbers (callers must not change the arrays). */
    public Map<Uuid, int[]> partitions() {
        return partitions;
    }

    Uuid[] topicArray() {
        return topicArray;
    }

    /** The partitions of {@code topicArray()[i]} at index i. */
    int[][] partitionArrays() {
        return partitionArrays;
    }

    /** The id this member is matched by, for log lines. */
    String label() {
        return instanceId != null ? "instance " + instanceId : "member " + memberId;
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof PlanMember that && Objects.equals(memberId, that.memberId)
            && Objects.equals(instanceId, that.instanceId) && Arrays.deepEquals(topicArray, that.topicArray)
            && Arrays.deepEquals(partitionArrays, that.partitionArrays);
    }

    @Override
    public int hashCode() {
        return Objects.hash(memberId, instanceId, Arrays.deepHashCode(partitionArrays));
    }

    @Override
    public String toString() {
        return "PlanMember(" + label() + ", " + partitions.size() + " topic(s))";
    }
}
