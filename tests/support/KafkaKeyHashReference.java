// Kafka's own key hash as the reference for ours (tests/integration/test_key_hash_kafka_java.py).
//
// Run with Java 17's single-file source launcher, no build step:
//   java -cp '<kafka libs>/*' tests/support/KafkaKeyHashReference.java < keys.txt
//
// Input, one key per line: <key bytes in hex, "-" for the empty key> <number of partitions>
// Output, one line per key: <Utils.murmur2(key)> <Utils.toPositive(murmur2)> <partition>
// where the partition comes from the producer's default partitioner entry point,
// BuiltInPartitioner.partitionForKey(serializedKey, numPartitions).

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.kafka.common.utils.Utils;

public class KafkaKeyHashReference {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.US_ASCII);
        HexFormat hex = HexFormat.of();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) continue;
            String[] f = line.split(" ");
            byte[] key = f[0].equals("-") ? new byte[0] : hex.parseHex(f[0]);
            int partitions = Integer.parseInt(f[1]);
            int hash = Utils.murmur2(key);
            out.println(hash + " " + Utils.toPositive(hash) + " "
                + BuiltInPartitioner.partitionForKey(key, partitions));
        }
        out.flush();
    }
}
