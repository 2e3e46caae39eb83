package io.rebalanceadvisor.broker.assignor;

import org.slf4j.Logger;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.LongSupplier;

/**
 * One warning per cause per interval: a bad plan is seen at every re-assignment of its group, and
 * the broker log must not fill with the same line (docs/operations/broker-plugin.md, "Logs").
 */
public final class RateLimitedLog implements Notes {

    /** Past this many remembered causes the memory is cleared, so it stays bounded. */
    static final int MAX_KEYS = 10_000;

    private final Logger log;
    private final long intervalMs;
    private final LongSupplier clockMs;
    private final Map<String, Long> lastLogged = new ConcurrentHashMap<>();

    public RateLimitedLog(Logger log, long intervalMs, LongSupplier clockMs) {
        this.log = log;
        this.intervalMs = intervalMs;
        this.clockMs = clockMs;
    }

    @Override
    public void note(String key, String message) {
        if (shouldLog(key)) {
            log.warn(message);
        }
    }

    /** True (and remembered) when {@code key} was not logged within the interval. */
    boolean shouldLog(String key) {
        long now = clockMs.getAsLong();
        if (lastLogged.size() >= MAX_KEYS) {
            lastLogged.clear();
        }
        boolean[] fresh = {false};
        lastLogged.compute(key, (k, last) -> {
            if (last == null || now - last >= intervalMs) {
                fresh[0] = true;
                return now;
            }
            return last;
        });
        return fresh[0];
    }
}
