package io.rebalanceadvisor.broker.telemetry;

import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class SampleTableTest {

    static MemberSample sample(String member, double idle, long receivedMs) {
        return new MemberSample("g", member, "", "c", "i", "java", "4", idle, receivedMs, Double.NaN, 0, 0, false,
            5_000, receivedMs);
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
