package io.rebalanceadvisor.broker.assignor;

import org.apache.kafka.common.Uuid;

import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One member of a plan and the partitions the plan gives it. It is matched by {@code instanceId}
 * when set (static members keep it across restarts), else by {@code memberId}.
 *
 * @param partitions topic id → sorted, distinct partition numbers
 */
public record PlanMember(String memberId, String instanceId, Map<Uuid, int[]> partitions) {

    public PlanMember {
        Map<Uuid, int[]> copy = new LinkedHashMap<>();
        partitions.forEach((topic, numbers) -> copy.put(topic, Arrays.stream(numbers).sorted().distinct().toArray()));
        partitions = Collections.unmodifiableMap(copy);
    }

    /** The id this member is matched by, for log lines. */
    String label() {
        return instanceId != null ? "instance " + instanceId : "member " + memberId;
    }
}
