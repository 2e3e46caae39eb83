package io.rebalanceadvisor.broker.telemetry;

import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class SampleTableTest {

    static MemberSample sample(String member, double idle, long receivedMs) {
        return new MemberSample("g", member, "", "c", "i", "java", "4", idle, receivedMs, Double.NaN, 0, 0, false,
            Double.NaN, 5_000, receivedMs, List.of());
    }

    @Test
    void keepsTheNewestPerMemberAndReportsChangesOnce() {
        SampleTable table = new SampleTable(10);
        table.put(sample("a", 0.5, 2_000));
        table.put(sample("a", 0.9, 1_000));  // older: ignored
        table.put(sample("b", 0.1, 1_500));
        List<MemberSample> changed = table.takeChanged();
        assertEquals(2, changed.size());
        assertEquals(0.5, changed.stream().filter(s -> s.memberId().equals("a")).findFirst().orElseThrow().idleRatio());
        assertTrue(table.takeChanged().isEmpty());
    }

    @Test
    void aSilentMemberIsForgottenAfterTwoPushIntervals() {
        SampleTable table = new SampleTable(10);
        table.put(sample("a", 0.5, 0));
        table.takeChanged();
        table.expire(10_000);  // exactly two intervals: still held
        assertTrue(table.takeRemoved().isEmpty());
        table.expire(10_001);
        assertEquals(List.of(new MemberSample.MemberKey("g", "a")), table.takeRemoved());
        assertEquals(0, table.size());
    }

    static List<Double> recentIdle(SampleTable table) {
        return table.takeChanged().get(0).recentIdle().stream().map(MemberSample.IdleReading::idleRatio).toList();
    }

    @Test
    void keepsTheLastFivePushesIdleRatios() {
        SampleTable table = new SampleTable(10);
        for (int i = 0; i < 7; i++) {
            table.put(sample("a", i / 10.0, i * 5_000L));  // one push every interval (5 s)
        }
        assertEquals(List.of(0.2, 0.3, 0.4, 0.5, 0.6), recentIdle(table));
        table.put(sample("a", 0.9, 30_000));  // same client time as the newest: not counted twice
        assertEquals(List.of(0.2, 0.3, 0.4, 0.5, 0.6), recentIdle(table));
    }

    @Test
    void readingsOlderThanFiveIntervalsAndNanAreNotKept() {
        SampleTable table = new SampleTable(10);
        table.put(sample("a", 0.1, 0));
        table.put(sample("a", 0.2, 20_000));
        table.put(sample("a", Double.NaN, 22_000));  // no idle ratio: nothing to add
        assertEquals(List.of(0.1, 0.2), recentIdle(table));
        table.put(sample("a", 0.3, 25_000));  // 25 s after the first: five intervals, it goes
        assertEquals(List.of(0.2, 0.3), recentIdle(table));
    }

    @Test
    void aMemberThatLeftStartsAfreshWhenItComesBack() {
        SampleTable table = new SampleTable(10);
        table.put(sample("a", 0.1, 0));
        table.expire(10_001);
        table.put(sample("a", 0.7, 10_500));
        assertEquals(List.of(0.7), recentIdle(table));
    }

    @Test
    void fullTableRefusesNewMembersButUpdatesKnownOnes() {
        SampleTable table = new SampleTable(1);
        assertTrue(table.put(sample("a", 0.5, 0)));
        assertFalse(table.put(sample("b", 0.5, 0)));
        assertTrue(table.put(sample("a", 0.4, 1)));
    }

    @Test
    void aFailedWriteIsRetriedUnlessNewerNewsArrived() {
        SampleTable table = new SampleTable(10);
        table.put(sample("a", 0.5, 0));
        table.put(sample("b", 0.5, 0));
        List<MemberSample> taken = table.takeChanged();
        table.put(sample("a", 0.3, 5));
        table.retry(taken, List.of());
        List<MemberSample> again = table.takeChanged();
        assertEquals(2, again.size());
        assertEquals(0.3, again.stream().filter(s -> s.memberId().equals("a")).findFirst().orElseThrow().idleRatio());
    }
}
