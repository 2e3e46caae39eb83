package io.rebalanceadvisor.broker.telemetry;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

/**
 * Diagnostics: with {@code rebalance.advisor.telemetry.capture.dir} set, the writer's thread keeps
 * the first pushes of each client as raw files (the payload and a line of context), for a bug report
 * or a test fixture (docs/operations/telemetry.md, "Capturing pushes"). Off by default; never throws.
 */
final class PushCapture {

    static final int PER_CLIENT = 8;
    private static final PushCapture OFF = new PushCapture(null);

    private final Path dir;
    private final Map<String, Integer> kept = new HashMap<>();

    private PushCapture(Path dir) {
        this.dir = dir;
    }

    static PushCapture at(String dir) {
        return dir == null || dir.isEmpty() ? OFF : new PushCapture(Path.of(dir));
    }

    void keep(Push push) {
        if (dir == null || push.data() == null || kept.size() > 1_000) {
            return;
        }
        int count = kept.merge(push.clientInstanceId(), 1, Integer::sum);
        if (count > PER_CLIENT) {
            return;
        }
        String name = safe(push.softwareName()) + "-" + safe(push.clientInstanceId()) + "-" + count;
        String context = "client_id=" + push.clientId() + "\nsoftware_name=" + push.softwareName()
            + "\nsoftware_version=" + push.softwareVersion() + "\npush_interval_ms=" + push.pushIntervalMs()
            + "\nreceived_ms=" + push.receivedMs() + "\nterminating=" + push.terminating()
            + "\ncontent_type=" + push.contentType() + "\n";
        try {
            Files.createDirectories(dir);
            Files.write(dir.resolve(name + ".bin"), push.data());
            Files.writeString(dir.resolve(name + ".txt"), context, StandardCharsets.UTF_8);
        } catch (IOException | RuntimeException ignored) {
            // a diagnostic aid only: a full disk must not stop the receiver
        }
    }

    private static String safe(String text) {
        return text == null ? "unknown" : text.replaceAll("[^A-Za-z0-9._-]", "_");
    }
}
