package io.rebalanceadvisor.broker.assignor;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;

import java.util.Map;
import java.util.Set;

/** The topics as uniform sees them in the fill step: only their unplaced partitions, renumbered. */
final class RestTopicDescriber implements SubscribedTopicDescriber {

    private final SubscribedTopicDescriber cluster;
    private final Map<Uuid, RestTopic> rest;

    RestTopicDescriber(SubscribedTopicDescriber cluster, Map<Uuid, RestTopic> rest) {
        this.cluster = cluster;
        this.rest = rest;
    }

    @Override
    public int numPartitions(Uuid topicId) {
        RestTopic topic = rest.get(topicId);
        return topic == null ? -1 : topic.size();
    }

    @Override
    public Set<String> racksForPartition(Uuid topicId, int partition) {
        RestTopic topic = rest.get(topicId);
        return topic == null ? Set.of() : cluster.racksForPartition(topicId, topic.real(partition));
    }
}
