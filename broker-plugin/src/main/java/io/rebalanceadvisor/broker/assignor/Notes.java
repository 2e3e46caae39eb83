package io.rebalanceadvisor.broker.assignor;

/**
 * Where the assignor's steps report what they could not apply. Keyed so that the same cause is
 * reported once per interval, not once per assign() call (see {@link RateLimitedLog}).
 */
@FunctionalInterface
public interface Notes {

    /** Reports {@code message}; {@code key} names the cause (the same key is rate-limited as one). */
    void note(String key, String message);

    /** Notes that are dropped (for callers that need none). */
    Notes NONE = (key, message) -> { };
}
