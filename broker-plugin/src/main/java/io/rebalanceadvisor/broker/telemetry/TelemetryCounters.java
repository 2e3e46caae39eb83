package io.rebalanceadvisor.broker.telemetry;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * What the receiver took, dropped and ignored, by cause (lock-free: request threads count too).
 * Logged at each log interval and written to the telemetry topic under the broker's key
 * (docs/operations/telemetry.md, "Counters").
 */
public final class TelemetryCounters {

    final AtomicLong pushes = new AtomicLong();
    final AtomicLong queueFull = new AtomicLong();
    final AtomicLong tooBig = new AtomicLong();
    final AtomicLong callbackErrors = new AtomicLong();
    final AtomicLong malformed = new AtomicLong();
    final AtomicLong notMember = new AtomicLong();
    final AtomicLong noMetric = new AtomicLong();
    final AtomicLong badValues = new AtomicLong();
    final AtomicLong tableFull = new AtomicLong();
    final AtomicLong samples = new AtomicLong();
    final AtomicLong written = new AtomicLong();
    final AtomicLong writeErrors = new AtomicLong();

    /** The counts by name, in a fixed order. */
    public Map<String, Long> snapshot() {
        Map<String, Long> out = new LinkedHashMap<>();
        out.put("pushes", pushes.get());
        out.put("dropped_queue_full", queueFull.get());
        out.put("dropped_too_big", tooBig.get());
        out.put("callback_errors", callbackErrors.get());
        out.put("malformed", malformed.get());
        out.put("not_a_member", notMember.get());
        out.put("no_metric", noMetric.get());
        out.put("bad_values", badValues.get());
        out.put("dropped_table_full", tableFull.get());
        out.put("samples", samples.get());
        out.put("written", written.get());
        out.put("write_errors", writeErrors.get());
        return out;
    }

    /** Counts what decoding one push gave. */
    void count(PushDecoder.Decoded decoded) {
        badValues.addAndGet(decoded.badValues());
        switch (decoded.problem()) {
            case NONE -> samples.incrementAndGet();
            case MALFORMED -> malformed.incrementAndGet();
            case NOT_A_MEMBER -> notMember.incrementAndGet();
            case NO_METRIC -> noMetric.incrementAndGet();
            default -> { }
        }
    }
}
