package io.rebalanceadvisor.broker.assignor;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.ConsumerGroupPartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

/**
 * The timing behind bench/broker_assignor.py (not a test, not in the shipped jar): assign() of
 * Kafka's uniform, of advised with no plan for the group (a miss, other groups' plans indexed) and
 * of advised applying a plan for every member (a hit), on the same group spec, in one JVM.
 * Args: members partitions topics repeats. Prints one JSON line per scenario and assignor.
 */
public final class AssignBench {

    private AssignBench() { }

    public static void main(String[] args) {
        int members = Integer.parseInt(args[0]);
        int partitions = Integer.parseInt(args[1]);
        int topicCount = Integer.parseInt(args[2]);
        int repeats = Integer.parseInt(args[3]);
        Random random = new Random(42);
        List<Uuid> topics = new ArrayList<>();
        Map<Uuid, Integer> counts = new HashMap<>();
        for (int t = 0; t < topicCount; t++) {
            Uuid id = new Uuid(random.nextLong(), random.nextLong());
            topics.add(id);
            counts.put(id, partitions / topicCount + (t < partitions % topicCount ? 1 : 0));
        }
        Specs.Topics describer = new Specs.Topics(counts);
        List<Specs.Member> group = new ArrayList<>();
        for (int m = 0; m < members; m++) {
            group.add(Specs.member(new Uuid(random.nextLong(), random.nextLong()).toString())
                .subscribes(topics.toArray(Uuid[]::new)));
        }
        GroupSpec empty = Specs.group(group);
        GroupAssignment steady = new UniformAssignor().assign(empty, describer);
        for (Specs.Member member : group) {  // the group as it runs: each member owns uniform's share
            steady.members().get(member.id).partitions().forEach((topic, owned) ->
                owned.forEach(p -> member.owns(topic, p)));
        }
        long now = System.currentTimeMillis();
        List<Plan> others = otherGroups(topics, now, random);
        GroupSpec steadySpec = Specs.group(group);
        Plan inForce = plan(group, steady, now, 0);
        List<Specs.Member> joined = new ArrayList<>(group);
        joined.add(Specs.member("joiner").subscribes(topics.toArray(Uuid[]::new)));
        // steady: the plan in force re-checked (nothing moves); shift: a plan moving a tenth of the
        // partitions is applied; join: a member joined, the plan (naming the others) is applied
        run("steady", steadySpec, describer, inForce, others, now, repeats);
        run("shift", steadySpec, describer, plan(group, steady, now, 10), others, now, repeats);
        run("join", Specs.group(joined), describer, plan(group, steady, now, 10), others, now, repeats);
    }

    private static void run(String scenario, GroupSpec spec, Specs.Topics describer, Plan plan, List<Plan> others,
                            long now, int repeats) {
        List<Plan> withPlan = new ArrayList<>(others);
        withPlan.add(plan);
        PlanIndex missIndex = PlanIndex.of(others);
        PlanIndex hitIndex = PlanIndex.of(withPlan);
        AdvisedConfig config = AdvisedConfig.defaults("unused:9092");
        Map<String, ConsumerGroupPartitionAssignor> assignors = new java.util.LinkedHashMap<>();
        assignors.put("uniform", new UniformAssignor());
        assignors.put("advised-miss", new AdvisedAssignor(config, () -> missIndex, () -> now, Notes.NONE));
        assignors.put("advised-hit", new AdvisedAssignor(config, () -> hitIndex, () -> now, Notes.NONE));
        checkHit(assignors.get("advised-hit").assign(spec, describer), plan);
        int members = spec.memberIds().size();
        int partitions = describer.counts().values().stream().mapToInt(Integer::intValue).sum();
        for (Map.Entry<String, ConsumerGroupPartitionAssignor> entry : assignors.entrySet()) {
            double[] ms = time(entry.getValue(), spec, describer, repeats);
            System.out.printf("{\"scenario\": \"%s\", \"assignor\": \"%s\", \"members\": %d, \"partitions\": %d, "
                    + "\"topics\": %d, \"repeats\": %d, \"median_ms\": %.3f, \"min_ms\": %.3f, \"cpu_median_ms\": %.3f, "
                    + "\"cpu_min_ms\": %.3f}%n", scenario, entry.getKey(), members, partitions, describer.counts().size(),
                repeats, ms[0], ms[1], ms[2], ms[3]);
        }
    }

    /**
     * Warm-up (JIT) rounds, then {@code repeats} timed calls: median and minimum wall ms, and the median
     * and minimum CPU ms of the calling thread, which other processes on a busy machine inflate far less than wall
     * time (it leaves out GC threads, so allocation shows in wall time only).
     */
    private static double[] time(ConsumerGroupPartitionAssignor assignor, GroupSpec spec,
                                 Specs.Topics describer, int repeats) {
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        for (int i = 0; i < Math.max(5, repeats / 2); i++) {
            assignor.assign(spec, describer);
        }
        double[] wall = new double[repeats];
        double[] cpu = new double[repeats];
        for (int i = 0; i < repeats; i++) {
            long cpuStart = threads.getCurrentThreadCpuTime();
            long start = System.nanoTime();
            assignor.assign(spec, describer);
            wall[i] = (System.nanoTime() - start) / 1e6;
            cpu[i] = (threads.getCurrentThreadCpuTime() - cpuStart) / 1e6;
        }
        Arrays.sort(wall);
        Arrays.sort(cpu);
        return new double[] {wall[repeats / 2], wall[0], cpu[repeats / 2], cpu[0]};
    }

    /** A plan for every member of {@code group}: its share of {@code steady}, less 1/{@code shift} of
     * it moved one member along (0: nothing moved, the plan equals the current assignment). */
    private static Plan plan(List<Specs.Member> group, GroupAssignment steady, long now, int shift) {
        List<Map<Uuid, List<Integer>>> planned = new ArrayList<>();
        for (Specs.Member member : group) {
            Map<Uuid, List<Integer>> mine = new HashMap<>();
            steady.members().get(member.id).partitions().forEach((t, ps) -> mine.put(t, new ArrayList<>(ps)));
            planned.add(mine);
        }
        for (int m = 0; m < group.size(); m++) {
            Map<Uuid, List<Integer>> from = planned.get(m);
            Map<Uuid, List<Integer>> to = planned.get((m + 1) % group.size());
            for (Map.Entry<Uuid, List<Integer>> entry : from.entrySet()) {
                List<Integer> ps = entry.getValue();
                int moving = shift == 0 ? 0 : ps.size() / shift;
                for (int i = 0; i < moving; i++) {
                    to.computeIfAbsent(entry.getKey(), t -> new ArrayList<>()).add(ps.remove(ps.size() - 1));
                }
            }
        }
        List<PlanMember> members = new ArrayList<>();
        for (int m = 0; m < group.size(); m++) {
            Map<Uuid, int[]> arrays = new HashMap<>();
            planned.get(m).forEach((t, ps) -> arrays.put(t, ps.stream().mapToInt(Integer::intValue).toArray()));
            members.add(new PlanMember(group.get(m).id, null, arrays));
        }
        return new Plan("bench", "p-bench", 1, now, members);
    }

    /** 100 other groups' plans of 50 members each: what the index holds on a busy cluster. */
    private static List<Plan> otherGroups(List<Uuid> topics, long now, Random random) {
        List<Plan> plans = new ArrayList<>();
        for (int g = 0; g < 100; g++) {
            List<PlanMember> members = new ArrayList<>();
            for (int m = 0; m < 50; m++) {
                members.add(new PlanMember(new Uuid(random.nextLong(), random.nextLong()).toString(), null,
                    Map.of(topics.get(m % topics.size()), new int[] {m})));
            }
            plans.add(new Plan("other-" + g, "p-" + g, 1, now, members));
        }
        return plans;
    }

    private static void checkHit(GroupAssignment result, Plan plan) {
        for (PlanMember member : plan.members()) {
            member.partitions().forEach((topic, ps) -> {
                for (int p : ps) {
                    if (!result.members().get(member.memberId()).partitions().get(topic).contains(p)) {
                        throw new IllegalStateException("the hit case did not apply the plan");
                    }
                }
            });
        }
    }
}
