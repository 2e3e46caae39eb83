package io.rebalanceadvisor.broker.telemetry;

/**
 * The newest telemetry of one consumer-group member: its poll idle ratio and, where the client
 * sends it, its records-consumed count (since {@code recordsStartMs} when {@code recordsDelta}, else
 * the client's running total), with the times the client measured them. A NaN is "not sent". The record written to the telemetry topic (docs/operations/telemetry.md, "The record").
 */
public record MemberSample(
    String group,
    String memberId,
    String instanceId,
    String clientId,
    String clientInstanceId,
    String softwareName,
    String softwareVersion,
    double idleRatio,
    long idleTimeMs,
    double recordsConsumed,
    long recordsStartMs,
    long recordsTimeMs,
    boolean recordsDelta,
    int pushIntervalMs,
    long receivedMs
) {
    /** The table's key: a member is one member id within one group. */
    public MemberKey key() {
        return new MemberKey(group, memberId);
    }

    /** Key of the topic and of the table. */
    public record MemberKey(String group, String memberId) {
    }
}
