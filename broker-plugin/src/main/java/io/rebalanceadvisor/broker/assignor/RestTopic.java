package io.rebalanceadvisor.broker.assignor;

import java.util.Arrays;

/**
 * The partitions of one topic that the plan left unplaced, renumbered 0..n-1 for uniform: Kafka's
 * uniform assignor takes a topic as "partitions 0 to count-1" and cannot be told to skip some, so
 * the fill step shows it a dense topic and maps its answer back (docs/operations/broker-plugin.md).
 */
final class RestTopic {

    /** Real partition numbers in ascending order, or null when every partition is in the rest. */
    private final int[] real;
    /** Real partition number → virtual one, -1 for placed partitions; null like {@link #real}. */
    private final int[] virtual;
    private final int size;

    private RestTopic(int[] real, int[] virtual, int size) {
        this.real = real;
        this.virtual = virtual;
        this.size = size;
    }

    /** The rest of a topic of {@code count} partitions; null when the plan placed them all. */
    static RestTopic of(int count, java.util.function.IntPredicate placed, int placedCount) {
        if (placedCount == 0) {
            return count == 0 ? null : new RestTopic(null, null, count);
        }
        if (placedCount >= count) {
            return null;
        }
        int[] real = new int[count - placedCount];
        int[] virtual = new int[count];
        Arrays.fill(virtual, -1);
        int next = 0;
        for (int partition = 0; partition < count && next < real.length; partition++) {
            if (!placed.test(partition)) {
                virtual[partition] = next;
                real[next++] = partition;
            }
        }
        return new RestTopic(real, virtual, count);
    }

    /** How many partitions uniform sees. */
    int size() {
        return real == null ? size : real.length;
    }

    int real(int virtualPartition) {
        return real == null ? virtualPartition : real[virtualPartition];
    }

    /** The virtual number of a real partition, -1 when it is not in the rest. */
    int virtual(int realPartition) {
        if (realPartition < 0 || realPartition >= size) {
            return -1;
        }
        return virtual == null ? realPartition : virtual[realPartition];
    }
}
