package io.rebalanceadvisor.broker.assignor;

import org.apache.kafka.common.Configurable;
import org.apache.kafka.coordinator.group.api.assignor.ConsumerGroupPartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.PartitionAssignorException;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.Map;
import java.util.Optional;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * A consumer-group assignor that applies the advisor's published plan (docs/operations/broker-plugin.md).
 * Principles, first wins: never a partition to a non-subscriber nor a subscribed partition unassigned;
 * then the plan for the members it names; then Kafka's uniform for all the rest (and for a group no plan fits).
 *
 * <p>assign() is a few steps, each its own class: {@link PlanMatcher} finds the group's plan,
 * {@link PlanApplier} places what the plan may place, {@link RestFiller} runs uniform over the rest.
 * Any failure in them gives uniform's assignment; nothing but uniform's own exception leaves assign().
 */
public final class AdvisedAssignor implements ConsumerGroupPartitionAssignor, Configurable {

    private static final Logger LOG = LoggerFactory.getLogger(AdvisedAssignor.class);

    private final UniformAssignor uniform = new UniformAssignor();
    private final RestFiller filler = new RestFiller(uniform);
    private final LongSupplier clockMs;
    private volatile AdvisedConfig config;
    private volatile Supplier<PlanIndex> plans;
    private volatile Notes notes;
    private volatile PlanMatcher matcher;

    /** What the broker instantiates: plans come from the shared background reader once configured. */
    public AdvisedAssignor() {
        this.clockMs = System::currentTimeMillis;
        this.config = null;
        this.plans = () -> PlanIndex.EMPTY;
        this.notes = new RateLimitedLog(LOG, AdvisedConfig.DEFAULT_LOG_INTERVAL_MS, clockMs);
        this.matcher = new PlanMatcher(AdvisedConfig.DEFAULT_MAX_AGE_MS, AdvisedConfig.DEFAULT_MIN_PRESENT);
    }

    /** With its plans from {@code plans} instead of a reader (tests, benches). */
    public AdvisedAssignor(AdvisedConfig config, Supplier<PlanIndex> plans, LongSupplier clockMs, Notes notes) {
        this.clockMs = clockMs;
        this.config = config;
        this.plans = plans;
        this.notes = notes;
        this.matcher = new PlanMatcher(config.maxPlanAgeMs(), config.minPresentFraction());
    }

    /** Cheap: the broker calls it about ten times at start-up; the reader starts on first assign(). */
    @Override
    public void configure(Map<String, ?> brokerConfig) {
        AdvisedConfig read = AdvisedConfig.from(brokerConfig);
        this.config = read;
        this.notes = new RateLimitedLog(LOG, read.logIntervalMs(), clockMs);
        this.matcher = new PlanMatcher(read.maxPlanAgeMs(), read.minPresentFraction());
        this.plans = () -> PlanReader.shared(read).current();
    }

    @Override
    public String name() {
        AdvisedConfig current = config;
        return current == null ? AdvisedConfig.DEFAULT_NAME : current.name();
    }

    @Override
    public GroupAssignment assign(GroupSpec spec, SubscribedTopicDescriber topics) throws PartitionAssignorException {
        GroupAssignment advised = null;
        try {
            advised = advised(spec, topics);
        } catch (Exception | LinkageError | StackOverflowError error) {
            notes.note("assign:" + error.getClass().getName(), "the advised assignment failed (" + error
                + "); this group gets uniform's assignment");
        }
        return advised != null ? advised : uniform.assign(spec, topics);
    }

    /** The plan's assignment, or null when no plan fits this group. */
    private GroupAssignment advised(GroupSpec spec, SubscribedTopicDescriber topics) {
        if (spec.memberIds().isEmpty()) {
            return null;
        }
        Optional<PlanMatch> match = matcher.match(spec, plans.get(), clockMs.getAsLong(), notes);
        if (match.isEmpty()) {
            return null;
        }
        Placement placement = PlanApplier.apply(match.get(), spec, topics, notes);
        return filler.fill(spec, topics, placement);
    }
}
