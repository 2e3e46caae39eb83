package io.rebalanceadvisor.broker.assignor;

import java.util.Map;

/**
 * The plan chosen for a group and which present member each of its members is.
 *
 * @param members present member id → the plan member it is
 */
record PlanMatch(Plan plan, Map<String, PlanMember> members) { }
