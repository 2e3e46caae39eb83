package io.rebalanceadvisor.broker.telemetry;

import io.rebalanceadvisor.broker.telemetry.MemberSample.IdleReading;
import io.rebalanceadvisor.broker.telemetry.MemberSample.MemberKey;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The newest sample per member, with the idle ratios of its last {@link #RECENT_PUSHES} pushes
 * within as many push intervals (the snapshot summarises them: docs/operations/telemetry.md, "The
 * record"), and what changed since the last write. Only the writer's thread
 * touches it (no locks). Bounded: past {@code maxMembers} a new member is refused and counted. A
 * member that stops pushing is forgotten {@link #MISSED_PUSHES} push intervals after its last push,
 * and a tombstone is written for it (docs/operations/telemetry.md, "The record").
 */
public final class SampleTable {

    /** Push intervals without a push after which a member is taken to have left. */
    public static final int MISSED_PUSHES = 2;

    /** Idle ratios kept per member: a few pushes, so one odd push does not decide alone. */
    public static final int RECENT_PUSHES = 5;

    private final int maxMembers;
    private final Map<MemberKey, MemberSample> newest = new HashMap<>();
    private final Set<MemberKey> changed = new LinkedHashSet<>();
    private final Set<MemberKey> removed = new LinkedHashSet<>();

    public SampleTable(int maxMembers) {
        this.maxMembers = maxMembers;
    }

    /** Keeps {@code sample} unless an equal or newer one is held; false when the table is full. */
    public boolean put(MemberSample sample) {
        MemberKey key = sample.key();
        MemberSample held = newest.get(key);
        if (held == null && newest.size() >= maxMembers) {
            return false;
        }
        if (held == null || held.receivedMs() <= sample.receivedMs()) {
            newest.put(key, sample.withRecentIdle(recent(held, sample)));
            changed.add(key);
            removed.remove(key);
        }
        return true;
    }

    /** The held readings and {@code sample}'s, the last {@link #RECENT_PUSHES} within as many intervals. */
    static List<IdleReading> recent(MemberSample held, MemberSample sample) {
        List<IdleReading> readings = new ArrayList<>(held == null ? List.of() : held.recentIdle());
        boolean repeated = !readings.isEmpty() && readings.get(readings.size() - 1).timeMs() >= sample.idleTimeMs();
        if (Double.isFinite(sample.idleRatio()) && !repeated) {
            readings.add(new IdleReading(sample.idleTimeMs(), sample.idleRatio()));
        }
        long newestMs = readings.isEmpty() ? 0 : readings.get(readings.size() - 1).timeMs();
        long windowMs = (long) RECENT_PUSHES * Math.max(sample.pushIntervalMs(), 1_000);
        readings.removeIf(r -> newestMs - r.timeMs() >= windowMs);
        int extra = readings.size() - RECENT_PUSHES;
        return extra > 0 ? readings.subList(extra, readings.size()) : readings;
    }

    /** The client said it is closing: forget its member at once. */
    public void forget(MemberKey key) {
        if (newest.remove(key) != null) {
            changed.remove(key);
            removed.add(key);
        }
    }

    /** Forgets the members silent for {@link #MISSED_PUSHES} push intervals by {@code nowMs}. */
    public void expire(long nowMs) {
        Iterator<MemberSample> samples = newest.values().iterator();
        while (samples.hasNext()) {
            MemberSample sample = samples.next();
            long interval = Math.max(sample.pushIntervalMs(), 1_000);
            if (nowMs - sample.receivedMs() > MISSED_PUSHES * interval) {
                samples.remove();
                changed.remove(sample.key());
                removed.add(sample.key());
            }
        }
    }

    /** The samples changed since the last call (then cleared). */
    public List<MemberSample> takeChanged() {
        List<MemberSample> out = new ArrayList<>();
        for (MemberKey key : changed) {
            out.add(newest.get(key));
        }
        changed.clear();
        return out;
    }

    /** The members forgotten since the last call (then cleared). */
    public List<MemberKey> takeRemoved() {
        List<MemberKey> out = new ArrayList<>(removed);
        removed.clear();
        return out;
    }

    /** Puts back what a failed write took, unless newer news arrived meanwhile. */
    public void retry(List<MemberSample> samples, List<MemberKey> keys) {
        for (MemberSample sample : samples) {
            if (newest.get(sample.key()) == sample) {
                changed.add(sample.key());
            }
        }
        for (MemberKey key : keys) {
            if (!newest.containsKey(key)) {
                removed.add(key);
            }
        }
    }

    public int size() {
        return newest.size();
    }
}
