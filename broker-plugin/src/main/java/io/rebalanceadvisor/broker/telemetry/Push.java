package io.rebalanceadvisor.broker.telemetry;

/**
 * One client's push as the request thread hands it over: the payload's bytes (copied, already
 * decompressed by the broker) and what the request context tells about the client. Decoded later,
 * on the writer's thread ({@link PushDecoder}).
 */
public record Push(
    String clientInstanceId,
    String clientId,
    String softwareName,
    String softwareVersion,
    int pushIntervalMs,
    long receivedMs,
    boolean terminating,
    String contentType,
    byte[] data
) {
}
