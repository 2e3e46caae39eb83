package io.rebalanceadvisor.broker.assignor;

import org.junit.jupiter.api.Test;
import org.slf4j.helpers.NOPLogger;

import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class RateLimitedLogTest {

    @Test
    void oneLinePerCausePerInterval() {
        AtomicLong now = new AtomicLong(0);
        RateLimitedLog log = new RateLimitedLog(NOPLogger.NOP_LOGGER, 1_000, now::get);
        assertTrue(log.shouldLog("a"));
        assertFalse(log.shouldLog("a"));
        assertTrue(log.shouldLog("b"), "another cause is logged");
        now.set(999);
        assertFalse(log.shouldLog("a"));
        now.set(1_000);
        assertTrue(log.shouldLog("a"), "again after the interval");
    }
}
