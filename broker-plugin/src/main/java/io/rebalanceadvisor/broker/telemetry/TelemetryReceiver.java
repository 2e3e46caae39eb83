package io.rebalanceadvisor.broker.telemetry;

import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.common.network.ClientInformation;
import org.apache.kafka.common.requests.RequestContext;
import org.apache.kafka.server.authorizer.AuthorizableRequestContext;
import org.apache.kafka.server.telemetry.ClientTelemetryContext;
import org.apache.kafka.server.telemetry.ClientTelemetryExporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporterProvider;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;

import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;

/**
 * The broker's KIP-714 client-telemetry receiver (KIP-1217 interface), listed in
 * {@code metric.reporters} (docs/operations/telemetry.md). The broker calls
 * {@link #exportMetrics} inline on a request thread for every push: it copies the payload into
 * the writer's bounded queue and returns; it never waits and never throws.
 */
public final class TelemetryReceiver implements MetricsReporter, ClientTelemetryExporterProvider,
    ClientTelemetryExporter {

    private volatile TelemetryWriter writer;

    @Override
    public void configure(Map<String, ?> brokerConfig) {
        TelemetryWriter shared = TelemetryWriter.shared(TelemetryConfig.from(brokerConfig));
        shared.startIfSubscribing();
        writer = shared;
    }

    @Override
    public void init(List<KafkaMetric> metrics) {
        // a client-telemetry receiver only: the broker's own metrics are not exported
    }

    @Override
    public void metricChange(KafkaMetric metric) {
        // see init()
    }

    @Override
    public void metricRemoval(KafkaMetric metric) {
        // see init()
    }

    @Override
    public void close() {
        TelemetryWriter current = writer;
        if (current != null) {
            current.close();
        }
    }

    /** This receiver's counters (the shared writer's); empty before configure(). */
    public TelemetryCounters counters() {
        TelemetryWriter current = writer;
        return current == null ? new TelemetryCounters() : current.counters();
    }

    @Override
    public ClientTelemetryExporter clientTelemetryExporter() {
        return this;
    }

    @Override
    public void exportMetrics(ClientTelemetryContext context, ClientTelemetryPayload payload) {
        TelemetryWriter current = writer;
        if (current == null) {
            return;  // not configured (cannot happen inside a broker)
        }
        try {
            current.counters().pushes.incrementAndGet();
            ByteBuffer data = payload.data();
            if (data == null || data.remaining() > current.maxPayloadBytes()) {
                current.counters().tooBig.incrementAndGet();
                return;
            }
            current.offer(push(context, payload, data));
        } catch (RuntimeException | LinkageError | OutOfMemoryError error) {
            current.counters().callbackErrors.incrementAndGet();
        }
    }

    private static Push push(ClientTelemetryContext context, ClientTelemetryPayload payload, ByteBuffer data) {
        byte[] bytes = new byte[data.remaining()];
        data.duplicate().get(bytes);
        AuthorizableRequestContext request = context.authorizableRequestContext();
        String software = "";
        String version = "";
        if (request instanceof RequestContext full && full.clientInformation != null) {
            ClientInformation info = full.clientInformation;
            software = info.softwareName();
            version = info.softwareVersion();
        }
        String instance = payload.clientInstanceId() == null ? "" : payload.clientInstanceId().toString();
        return new Push(instance, request == null ? "" : request.clientId(), software, version,
            context.pushIntervalMs(), System.currentTimeMillis(), payload.isTerminating(), payload.contentType(),
            bytes);
    }
}
