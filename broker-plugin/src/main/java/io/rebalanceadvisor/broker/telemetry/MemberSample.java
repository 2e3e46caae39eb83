package io.rebalanceadvisor.broker.telemetry;

import java.util.List;

/**
 * The newest telemetry of one consumer-group member: its poll idle ratio and, where the client
 * sends it, its records-consumed count (since {@code recordsStartMs} when {@code recordsDelta}, else
 * the client's running total) and its time between polls (Java only), with the times the client
 * measured them; and the idle ratios of its last few pushes ({@link SampleTable}). A NaN is "not
 * sent". The record written to the telemetry topic (docs/operations/telemetry.md, "The record").
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
    double timeBetweenPollMs,
    int pushIntervalMs,
    long receivedMs,
    List<IdleReading> recentIdle
) {
    public MemberSample {
        recentIdle = List.copyOf(recentIdle);
    }

    /** The same sample with {@code recent} as its recent idle ratios. */
    public MemberSample withRecentIdle(List<IdleReading> recent) {
        return new MemberSample(group, memberId, instanceId, clientId, clientInstanceId, softwareName,
            softwareVersion, idleRatio, idleTimeMs, recordsConsumed, recordsStartMs, recordsTimeMs, recordsDelta,
            timeBetweenPollMs, pushIntervalMs, receivedMs, recent);
    }

    /** One push's idle ratio and the client's time of it (ms since the epoch). */
    public record IdleReading(long timeMs, double idleRatio) {
    }

    /** The table's key: a member is one member id within one group. */
    public MemberKey key() {
        return new MemberKey(group, memberId);
    }

    /** Key of the topic and of the table. */
    public record MemberKey(String group, String memberId) {
    }
}
