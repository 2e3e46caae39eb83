// Candidate (a) of bench/broker_trigger.py: make the broker re-assign a group by removing members
// through Kafka's Java Admin API (confluent-kafka's AdminClient has no such call).
//
//   java -cp '<kafka jars>/*' RemoveGroupMembers.java BOOTSTRAP GROUP [INSTANCE_ID]
//
// With INSTANCE_ID: removes that static member (MemberToRemove takes group.instance.id only);
// without: removes every member (the only way Kafka 4.3's Admin API removes dynamic members).
// Prints the seconds the call took; exits 2 with one line on stderr when it fails.
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;

public class RemoveGroupMembers {
    public static void main(String[] args) throws Exception {
        Properties config = new Properties();
        config.put("bootstrap.servers", args[0]);
        RemoveMembersFromConsumerGroupOptions options = args.length > 2
                ? new RemoveMembersFromConsumerGroupOptions(List.of(new MemberToRemove(args[2])))
                : new RemoveMembersFromConsumerGroupOptions();
        long started = System.nanoTime();
        try (Admin admin = Admin.create(config)) {
            admin.removeMembersFromConsumerGroup(args[1], options).all().get(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            Throwable cause = e;
            while (cause.getCause() != null) {
                cause = cause.getCause();
            }
            System.err.println(cause.getClass().getSimpleName() + ": " + cause.getMessage());
            System.exit(2);
        }
        System.out.printf("%.3f%n", (System.nanoTime() - started) / 1e9);
    }
}
