package io.rebalanceadvisor.broker.assignor;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;

import java.util.Map;
import java.util.Set;

/** One member's target partitions, as the assignor returns them. */
record Assigned(Map<Uuid, Set<Integer>> partitions) implements MemberAssignment { }
