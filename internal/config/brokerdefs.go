package config

import (
	"fmt"
	"math"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// BrokerDefs are the server.properties settings sluice knows, by their
// Apache Kafka names (Kafka's KafkaConfig / ServerConfigs definitions),
// with Kafka's type, default and valid range. A key that is neither here
// nor a topic-default synonym (BrokerDef) is unknown: `sluice serve`
// logs Kafka's "supplied but isn't a known config" warning and starts.
// Every setting has a Status: implemented, ignored (accepted and
// validated so that a Kafka user's file works, but changing nothing; a
// warning names those set to a non-default value) or refused (only the
// default or a harmless value is accepted: sluice does not implement what
// the others ask for, and they would change membership, durability,
// security or where data lives).
//
// The topic-config synonyms (log.retention.ms, log.segment.bytes,
// min.insync.replicas, ...) are not listed here: BrokerDef derives them
// from TopicDefs so that a broker default is validated by the same rule
// as the topic config it defaults.
var BrokerDefs = slices.Concat(coreBrokerDefs, securityDefs, kafka42Defs, remoteStorageDefs, deadLetterDefs)

// ReplicaSelectorRackAware is Kafka's rack-aware replica selector class
// (replica.selector.class, KIP-392).
const ReplicaSelectorRackAware = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

// checkReplicaSelector accepts the selectors sluice implements: none (the
// leader) and Kafka's rack-aware one, by its class or simple name.
func checkReplicaSelector(v string) error {
	switch v {
	case "", ReplicaSelectorRackAware, "RackAwareReplicaSelector":
		return nil
	}
	return fmt.Errorf("expected empty or %s (no other replica selector is implemented)", ReplicaSelectorRackAware)
}

// coreBrokerDefs are the settings other than security's (securitydefs.go).
var coreBrokerDefs = []Def{
	// Server basics and KRaft.
	{Name: "process.roles", Type: TypeList, Default: "", Enum: []string{"broker", "controller"}, Doc: "The roles of this node (KRaft), checked against controller.quorum.voters as Kafka does: with controller, node.id must be a voter; without it, node.id must not be, and a quorum must be listed. Every sluice node is a broker: controller alone is refused."},
	{Name: "node.id", Type: TypeInt, Default: "1", Min: 0, Max: math.MaxInt32, Doc: "This node's id (--node-id). Kafka's default is -1 (required in KRaft); sluice's is 1."},
	{Name: "broker.id", Type: TypeInt, Default: "-1", Min: -1, Max: math.MaxInt32, Doc: "Older name of node.id, used when node.id is not set."},
	{Name: "controller.quorum.voters", Type: TypeList, Default: "", Check: checkVoters, Form: "id@host:port,...", Doc: "The controller quorum as id@host:port,... (--voters). Empty: a single-node quorum of this node."},
	{Name: "controller.quorum.bootstrap.servers", Type: TypeList, Default: "", Check: checkHostPorts, Form: "host:port,...", Doc: "KIP-853 dynamic quorum bootstrap (host:port,...), used without controller.quorum.voters. Naming only this node's own CONTROLLER listener (a standalone combined node), the node is a quorum of itself; naming other controllers, the node follows the quorum they answer for (a broker-only node; a node with a CONTROLLER listener as a prospective voter, added with sluice quorum add-controller), learning the cluster id from it."},
	{Name: "controller.listener.names", Type: TypeList, Default: "", Refuse: refuseControllerListenerNames, Refuses: "any name but CONTROLLER", Doc: "Listener names used by the controller. sluice's controller listener is the one named CONTROLLER in listeners (or --controller-listen); another name is refused at start, since sluice would serve clients on the listener Kafka reserves for the quorum."},
	{Name: "controller.quorum.election.timeout.ms", Type: TypeInt, Default: "1000", Status: StatusIgnored, Doc: "Raft election timeout. sluice's controller uses a fixed one-second raft timeout."},
	{Name: "controller.quorum.fetch.timeout.ms", Type: TypeInt, Default: "2000", Status: StatusIgnored},
	{Name: "controller.quorum.election.backoff.max.ms", Type: TypeInt, Default: "1000", Status: StatusIgnored},
	{Name: "metadata.log.dir", Type: TypeString, Default: "", Status: StatusRefused, Refuses: "any directory but the data directory (CheckDirs)", Doc: "Where KRaft keeps its metadata log. sluice keeps it under the data directory (__raft): a metadata.log.dir naming another directory is refused at start."},
	{Name: "broker.rack", Type: TypeString, Default: "", Doc: "Rack of this broker, registered with the controller and given to clients in Metadata; replica.selector.class=RackAwareReplicaSelector sends a consumer of another rack to an in-sync replica in its client.rack (KIP-392). Placement is not rack-aware."},
	{Name: "replica.selector.class", Type: TypeString, Default: "", Check: checkReplicaSelector, Form: "empty, or " + ReplicaSelectorRackAware, Doc: "The leader's choice of a replica for a consumer to fetch from (KIP-392). Empty: the leader (Kafka's LeaderSelector). org.apache.kafka.common.replica.RackAwareReplicaSelector: an in-sync replica in the consumer's client.rack that holds the fetch offset, the most caught up first; the leader if its rack is the consumer's or none is. Any other class is refused at start. Followers serve every consumer that sends client metadata (Fetch v11+), up to their own high watermark."},

	// Listeners and the socket server.
	{Name: "listeners", Type: TypeList, Default: "PLAINTEXT://:9092", Check: checkListeners, Form: "NAME://host:port,...", Doc: "The Kafka listeners, NAME://host:port,..., at most 16, each on its own port, plus the CONTROLLER listener of the metadata quorum (--controller-listen). Each name's security protocol is in listener.security.protocol.map. --listen replaces the address of the PLAINTEXT listener, or of the first one. An empty host means every interface (docs/security.md)."},
	{Name: "advertised.listeners", Type: TypeList, Default: "", Check: checkListeners, Form: "NAME://host:port,...", Doc: "The address of each listener given to clients and other brokers, by listener name (a name must be one of listeners). A listener not named here advertises its own address; a wildcard host advertises the machine's first non-loopback IPv4 address. Metadata, FindCoordinator and DescribeCluster answer with the addresses of the listener the request came in on."},
	{Name: "inter.broker.listener.name", Type: TypeString, Default: "", Doc: "The listener followers fetch from on other brokers (its name on every broker). Empty: the listener named after security.inter.broker.protocol if that is set, else PLAINTEXT if there is such a listener (Kafka's default), else the first Kafka listener."},
	{Name: "listener.security.protocol.map", Type: TypeList, Default: "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", Check: checkProtocolMap, Form: "NAME:PROTOCOL,... (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)", Doc: "Listener name to security protocol. The CONTROLLER listener is PLAINTEXT or SSL (with ssl.client.auth=required, mTLS between the voters and every broker that reaches them; docs/security.md)."},
	{Name: "security.inter.broker.protocol", Type: TypeString, Default: "PLAINTEXT", Enum: securityProtocols, Doc: "Names the inter-broker listener when inter.broker.listener.name is not set (the listener of that name)."},
	{Name: "num.network.threads", Type: TypeInt, Default: "3", Min: 1, Max: math.MaxInt32, Status: StatusIgnored, Doc: "sluice runs two goroutines per connection instead of a thread pool."},
	{Name: "num.io.threads", Type: TypeInt, Default: "8", Min: 1, Max: math.MaxInt32, Status: StatusIgnored, Doc: "sluice handles requests on the connection's goroutine."},
	{Name: "background.threads", Type: TypeInt, Default: "10", Min: 1, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "queued.max.requests", Type: TypeInt, Default: "500", Min: 1, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "socket.send.buffer.bytes", Type: TypeInt, Default: "102400", Min: -1, Max: math.MaxInt32, Status: StatusIgnored, Doc: "SO_SNDBUF in bytes; -1 is the OS default (which sluice uses)."},
	{Name: "socket.receive.buffer.bytes", Type: TypeInt, Default: "102400", Min: -1, Max: math.MaxInt32, Status: StatusIgnored, Doc: "SO_RCVBUF in bytes; -1 is the OS default (which sluice uses)."},
	{Name: "socket.request.max.bytes", Type: TypeInt, Default: "104857600", Min: 1, Max: math.MaxInt32, Doc: "Largest request accepted, in bytes; a larger frame closes the connection."},
	{Name: "socket.listen.backlog.size", Type: TypeInt, Default: "50", Min: 1, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "max.connections", Type: TypeInt, Default: "10000", Min: 0, Max: math.MaxInt32, Doc: "Most client connections at once. Kafka's default is 2147483647; sluice's is 10000."},
	{Name: "max.connections.per.ip", Type: TypeInt, Default: "2147483647", Min: 0, Max: math.MaxInt32, Doc: "Most connections from one IP address at once; a further one is closed at accept (Kafka's ConnectionQuotas). Counted per remote IP across all listeners (docs/security.md)."},
	{Name: "max.connections.per.ip.overrides", Type: TypeString, Default: "", Check: checkConnOverrides, Form: "host:count,...", Doc: "Per-host exceptions to max.connections.per.ip, host:count,... A host name is resolved once at start."},
	{Name: "max.connection.creation.rate", Type: TypeInt, Default: "2147483647", Min: 0, Max: math.MaxInt32, Doc: "Most new connections per second across the listeners (KIP-612); over it the acceptors wait before accepting more, so clients queue in the listen backlog."},
	{Name: "quota.window.num", Type: TypeInt, Default: "11", Min: 1, Max: 1000, Doc: "Samples the client quota rates are measured over (ClientQuotaManager); sluice uses at least 2."},
	{Name: "quota.window.size.seconds", Type: TypeInt, Default: "1", Min: 1, Max: 3600, Doc: "Length of one client quota sample, in seconds."},
	{Name: "connections.max.idle.ms", Type: TypeLong, Default: "600000", Doc: "Idle connections are closed after this many milliseconds, authenticated or not; it also bounds a TLS handshake when shorter than 10 s (docs/security.md)."},
	{Name: "fetch.max.bytes", Type: TypeInt, Default: "57671680", Min: 1024, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "max.incremental.fetch.session.cache.slots", Type: TypeInt, Default: "1000", Min: 0, Max: math.MaxInt32, Doc: "Most incremental fetch sessions (KIP-227) the broker keeps at once, for consumers and followers together; 0 disables them (every fetch is then a full one). A full cache evicts by Kafka's rules: a session unused for 120 s, else a consumer's session for a follower's, else one older than 120 s with fewer partitions (docs/fetch-sessions.md)."},

	// Logs.
	{Name: "log.dirs", Type: TypeList, Default: "", Refuse: refuseSeveralDirs, Refuses: "more than one directory", Doc: "Data directory (--data-dir): one directory. Several (Kafka's JBOD) are refused at start."},
	{Name: "log.dir", Type: TypeList, Default: "/tmp/kafka-logs", Refuse: refuseSeveralDirs, Refuses: "more than one directory", Doc: "Data directory when log.dirs is not set; one directory (several are refused at start). sluice's default data directory is ./sluice-data."},
	{Name: "max.broker.partitions", Type: TypeInt, Default: "50000", Min: 1, Max: math.MaxInt32, Doc: "KIP-578: the most partition replicas one broker may hold. A CreateTopics or CreatePartitions that would put more on a broker is refused whole with POLICY_VIOLATION (Kafka has no RESOURCE_LIMIT_REACHED code); placement skips brokers at the limit. Kafka's proposed default is 2147483647; sluice's is 50000."},
	{Name: "max.partitions", Type: TypeInt, Default: "100000", Min: 1, Max: math.MaxInt32, Doc: "KIP-578: the most partitions in the cluster; a CreateTopics or CreatePartitions beyond it is refused whole with POLICY_VIOLATION. Kafka's proposed default is 2147483647; sluice's is 100000."},
	{Name: "log.max.open.files", Type: TypeInt, Default: "0", Min: 0, Max: math.MaxInt32, Doc: "sluice only: most segment and index files held open at once; idle ones are closed least recently used first and reopened when needed. 0 is a quarter of the process's open-file limit (RLIMIT_NOFILE), at least 64."},
	{Name: "num.partitions", Type: TypeInt, Default: "1", Min: 1, Max: math.MaxInt32, Doc: "Partitions of an auto-created topic or a CreateTopics request with -1."},
	{Name: "default.replication.factor", Type: TypeInt, Default: "1", Min: 1, Max: math.MaxInt32, Doc: "Replication factor of an auto-created topic or a CreateTopics request with -1."},
	{Name: "num.recovery.threads.per.data.dir", Type: TypeInt, Default: "8", Min: 1, Max: 64, Doc: "Partitions opened and recovered in parallel at startup and when many are assigned at once. Kafka's default is 2; sluice's is 8, since opening a partition mostly waits on fsync."},
	{Name: "auto.create.topics.enable", Type: TypeBoolean, Default: "true", Doc: "Create a topic on a Metadata or Produce request for a topic that does not exist."},
	{Name: "delete.topic.enable", Type: TypeBoolean, Default: "true", Doc: "Allow DeleteTopics."},
	{Name: "log.retention.hours", Type: TypeInt, Default: "168", Min: -1, Max: math.MaxInt32, Doc: "Default retention.ms in hours, used when log.retention.ms and log.retention.minutes are not set; -1 keeps records forever."},
	{Name: "log.retention.minutes", Type: TypeInt, Default: "", Min: -1, Max: math.MaxInt32, Doc: "Default retention.ms in minutes, used when log.retention.ms is not set; -1 keeps records forever."},
	{Name: "log.retention.check.interval.ms", Type: TypeLong, Default: "300000", Min: 1, Max: math.MaxInt64, Doc: "How often segments are checked against retention.ms and retention.bytes."},
	{Name: "log.roll.hours", Type: TypeInt, Default: "168", Min: 1, Max: math.MaxInt32, Doc: "Default segment.ms in hours, used when log.roll.ms is not set."},
	{Name: "log.roll.jitter.hours", Type: TypeInt, Default: "0", Min: 0, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "log.cleaner.enable", Type: TypeBoolean, Default: "true", Doc: "Run the log cleaner, which compacts topics whose cleanup.policy contains compact (docs/compaction.md)."},
	{Name: "log.cleaner.threads", Type: TypeInt, Default: "1", Min: 1, Max: 64, Doc: "Log cleaner threads."},
	{Name: "log.cleaner.dedupe.buffer.size", Type: TypeLong, Default: "134217728", Min: 0, Max: math.MaxInt64, Doc: "Memory (bytes) for the cleaners' key maps, divided among the threads; a pass allocates what its dirty section needs, up to it."},
	{Name: "log.cleaner.io.max.bytes.per.second", Type: TypeDouble, Default: "1.7976931348623157E308", Min: 0, Max: math.MaxFloat64, Doc: "Bytes per second the cleaner threads read and write, together."},
	{Name: "log.cleaner.backoff.ms", Type: TypeLong, Default: "15000", Min: 0, Max: math.MaxInt64, Doc: "Sleep of a cleaner thread when no compacted log is due."},
	{Name: "log.cleaner.io.buffer.size", Type: TypeInt, Default: "524288", Min: 0, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "log.cleaner.io.buffer.load.factor", Type: TypeDouble, Default: "0.9", Min: 0, Max: 1, Status: StatusIgnored, Doc: "The key map's load factor is fixed at 0.9."},
	{Name: "sluice.log.flush.syncfs.min.partitions", Type: TypeInt, Default: "16", Min: 0, Max: math.MaxInt32, Doc: "sluice only: a number of partitions. When at least this many partitions wait for their fsync at once (queued or being fsynced one by one), the flush workers make all of the queued ones durable with one syncfs(2) of the data directory's filesystem instead of one fsync each, one such round at a time (the next one covers what was queued meanwhile). syncfs writes back every dirty file of that filesystem, other programs' too, so it pays when many partitions are dirty and the filesystem is sluice's own (docs/storage.md, docs/performance.md). A failed syncfs fails every partition of its round as a failed fsync does: the broker halts. 0 disables it; Linux 5.8 or later only (elsewhere each partition is fsynced)."},
	{Name: "log.flush.scheduler.interval.ms", Type: TypeLong, Default: maxLong, Status: StatusIgnored, Doc: "sluice fsyncs every append before acknowledging it (group commit)."},
	{Name: "log.flush.offset.checkpoint.interval.ms", Type: TypeInt, Default: "60000", Min: 0, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "log.flush.start.offset.checkpoint.interval.ms", Type: TypeInt, Default: "60000", Min: 0, Max: math.MaxInt32, Status: StatusIgnored},

	// Replication.
	{Name: "replica.lag.time.max.ms", Type: TypeLong, Default: "30000", Doc: "A follower that has not caught up with the leader's log end for this long leaves the ISR."},
	{Name: "replica.fetch.max.bytes", Type: TypeInt, Default: "1048576", Min: 0, Max: math.MaxInt32, Doc: "Bytes a follower asks per partition in one fetch."},
	{Name: "replica.fetch.response.max.bytes", Type: TypeInt, Default: "10485760", Min: 0, Max: math.MaxInt32, Doc: "Bytes a follower asks for in one whole fetch."},
	{Name: "replica.fetch.wait.max.ms", Type: TypeInt, Default: "500", Doc: "Longest a follower's fetch waits on the leader for new data, in milliseconds."},
	{Name: "replica.fetch.min.bytes", Type: TypeInt, Default: "1", Doc: "Bytes a follower's fetch waits for."},
	{Name: "replica.fetch.backoff.ms", Type: TypeInt, Default: "1000", Min: 0, Max: math.MaxInt32, Doc: "Pause after a failed follower fetch, in milliseconds."},
	{Name: "replica.socket.timeout.ms", Type: TypeInt, Default: "30000", Status: StatusIgnored},
	{Name: "replica.socket.receive.buffer.bytes", Type: TypeInt, Default: "65536", Status: StatusIgnored},
	{Name: "leader.replication.throttled.rate", Type: TypeLong, Default: maxLong, Min: 0, Max: math.MaxInt64, Doc: "KIP-73: bytes per second this broker, as leader, sends to followers for the replicas topics name in leader.replication.throttled.replicas while they are out of the ISR; over it their partitions get no records (the others still flow). Dynamic: a change applies at once, e.g. kafka-reassign-partitions --throttle."},
	{Name: "follower.replication.throttled.rate", Type: TypeLong, Default: maxLong, Min: 0, Max: math.MaxInt64, Doc: "KIP-73: bytes per second this broker, as follower, fetches for its replicas that topics name in follower.replication.throttled.replicas while they are out of the ISR; over it they are left out of its fetches. Dynamic: a change applies at once, e.g. kafka-reassign-partitions --throttle."},
	{Name: "replication.quota.window.num", Type: TypeInt, Default: "11", Min: 1, Max: 1000, Doc: "Samples the replication throttle rates are measured over (ReplicationQuotaManager); sluice uses at least 2."},
	{Name: "replication.quota.window.size.seconds", Type: TypeInt, Default: "1", Min: 1, Max: 3600, Doc: "Length of one replication throttle sample, in seconds."},
	{Name: "num.replica.fetchers", Type: TypeInt, Default: "1", Status: StatusIgnored, Doc: "sluice runs one fetcher per leader broker."},
	{Name: "replica.high.watermark.checkpoint.interval.ms", Type: TypeLong, Default: "5000", Status: StatusIgnored, Doc: "sluice checkpoints high watermarks every 5 s."},
	{Name: "auto.leader.rebalance.enable", Type: TypeBoolean, Default: "true", Doc: "Move leadership back to preferred replicas."},
	{Name: "leader.imbalance.check.interval.seconds", Type: TypeLong, Default: "300", Min: 1, Max: math.MaxInt64, Doc: "How often the controller checks for leadership imbalance."},
	{Name: "leader.imbalance.per.broker.percentage", Type: TypeInt, Default: "10", Status: StatusIgnored},

	// Broker lifecycle.
	{Name: "broker.session.timeout.ms", Type: TypeInt, Default: "9000", Min: 1, Max: math.MaxInt32, Doc: "A broker with no heartbeat for this long is fenced by the controller (a broker whose process is gone, its connections closed and its listener refusing, is fenced at once: docs/controller.md, Failover)."},
	{Name: "broker.heartbeat.interval.ms", Type: TypeInt, Default: "2000", Min: 1, Max: math.MaxInt32, Doc: "Interval between a broker's heartbeats to the controller (capped at a third of broker.session.timeout.ms)."},
	{Name: "controlled.shutdown.enable", Type: TypeBoolean, Default: "true", Doc: "On SIGTERM or SIGINT, move leadership away and leave the ISRs before stopping."},
	{Name: "controlled.shutdown.max.retries", Type: TypeInt, Default: "3", Min: 0, Max: math.MaxInt32, Doc: "Retries of a controlled shutdown the controller has not granted; the whole wait is bounded by (1 + retries) x controlled.shutdown.retry.backoff.ms."},
	{Name: "controlled.shutdown.retry.backoff.ms", Type: TypeLong, Default: "5000", Min: 0, Max: math.MaxInt64, Doc: "How long each controlled-shutdown attempt waits for the grant, in milliseconds."},

	// Internal topics and coordinators.
	{Name: "offsets.topic.replication.factor", Type: TypeShort, Default: "3", Min: 1, Max: math.MaxInt16, Doc: "Replication factor of __consumer_offsets (capped at the number of live brokers when it is created)."},
	{Name: "offsets.topic.num.partitions", Type: TypeInt, Default: "50", Min: 1, Max: math.MaxInt32, Doc: "Partitions of __consumer_offsets."},
	{Name: "offsets.topic.segment.bytes", Type: TypeInt, Default: "104857600", Min: 1, Max: math.MaxInt32, Doc: "segment.bytes of __consumer_offsets."},
	{Name: "offsets.retention.minutes", Type: TypeInt, Default: "10080", Min: 1, Max: math.MaxInt32, Doc: "Committed offsets of an empty group expire after this many minutes."},
	{Name: "offsets.retention.check.interval.ms", Type: TypeLong, Default: "600000", Min: 1, Max: math.MaxInt64, Status: StatusIgnored},
	{Name: "offsets.commit.timeout.ms", Type: TypeInt, Default: "5000", Min: 1, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "offset.metadata.max.bytes", Type: TypeInt, Default: "4096", Doc: "Largest metadata string of a committed offset."},
	{Name: "group.initial.rebalance.delay.ms", Type: TypeInt, Default: "3000", Doc: "How long the first rebalance of a new group waits for more members."},
	{Name: "group.min.session.timeout.ms", Type: TypeInt, Default: "6000", Min: 0, Max: math.MaxInt32, Doc: "Shortest session timeout a classic-protocol member may ask for, in milliseconds; a JoinGroup below it gets INVALID_SESSION_TIMEOUT."},
	{Name: "group.max.session.timeout.ms", Type: TypeInt, Default: "1800000", Min: 0, Max: math.MaxInt32, Doc: "Longest session timeout a classic-protocol member may ask for, in milliseconds; a JoinGroup above it gets INVALID_SESSION_TIMEOUT."},
	{Name: "group.max.size", Type: TypeInt, Default: "2147483647", Min: 1, Max: math.MaxInt32, Doc: "Most members of one consumer group."},
	{Name: "group.coordinator.rebalance.protocols", Type: TypeList, Default: "classic,consumer", Enum: []string{"classic", "consumer", "share", "streams"}, Status: StatusImplemented, Doc: "Group protocols served: without consumer, ConsumerGroupHeartbeat and ConsumerGroupDescribe are not advertised and answer UNSUPPORTED_VERSION (share and streams are accepted and change nothing: share groups are served while the share.version feature is 1, as in Kafka 4.1+)."},
	{Name: "group.consumer.session.timeout.ms", Type: TypeInt, Default: "45000", Min: 1, Max: math.MaxInt32, Status: StatusImplemented, Doc: "Session timeout of the members of KIP-848 consumer groups (default of the group config consumer.session.timeout.ms)."},
	{Name: "group.consumer.min.session.timeout.ms", Type: TypeInt, Default: "45000", Min: 1, Max: math.MaxInt32, Status: StatusImplemented, Doc: "Least consumer.session.timeout.ms a group config may set."},
	{Name: "group.consumer.max.session.timeout.ms", Type: TypeInt, Default: "60000", Min: 1, Max: math.MaxInt32, Status: StatusImplemented, Doc: "Greatest consumer.session.timeout.ms a group config may set."},
	{Name: "group.consumer.heartbeat.interval.ms", Type: TypeInt, Default: "5000", Min: 1, Max: math.MaxInt32, Status: StatusImplemented, Doc: "Heartbeat interval given to the members of KIP-848 consumer groups (default of the group config consumer.heartbeat.interval.ms)."},
	{Name: "group.consumer.min.heartbeat.interval.ms", Type: TypeInt, Default: "5000", Min: 1, Max: math.MaxInt32, Status: StatusImplemented, Doc: "Least consumer.heartbeat.interval.ms a group config may set."},
	{Name: "group.consumer.max.heartbeat.interval.ms", Type: TypeInt, Default: "15000", Min: 1, Max: math.MaxInt32, Status: StatusImplemented, Doc: "Greatest consumer.heartbeat.interval.ms a group config may set."},
	{Name: "group.share.session.timeout.ms", Type: TypeInt, Default: "45000", Min: 1, Max: math.MaxInt32, Doc: "Session timeout of the members of share groups (KIP-932): a member without a ShareGroupHeartbeat for this long is removed (default of the group config share.session.timeout.ms)."},
	{Name: "group.share.min.session.timeout.ms", Type: TypeInt, Default: "45000", Min: 1, Max: math.MaxInt32, Doc: "Least share.session.timeout.ms a group config may set."},
	{Name: "group.share.max.session.timeout.ms", Type: TypeInt, Default: "60000", Min: 1, Max: math.MaxInt32, Doc: "Greatest share.session.timeout.ms a group config may set."},
	{Name: "group.share.heartbeat.interval.ms", Type: TypeInt, Default: "5000", Min: 1, Max: math.MaxInt32, Doc: "Heartbeat interval given to the members of share groups (default of the group config share.heartbeat.interval.ms)."},
	{Name: "group.share.min.heartbeat.interval.ms", Type: TypeInt, Default: "5000", Min: 1, Max: math.MaxInt32, Doc: "Least share.heartbeat.interval.ms a group config may set."},
	{Name: "group.share.max.heartbeat.interval.ms", Type: TypeInt, Default: "15000", Min: 1, Max: math.MaxInt32, Doc: "Greatest share.heartbeat.interval.ms a group config may set."},
	{Name: "group.share.record.lock.duration.ms", Type: TypeInt, Default: "30000", Min: 1000, Max: 3600000, Status: StatusImplemented, Doc: "Default of the group config share.record.lock.duration.ms."},
	{Name: "group.share.min.record.lock.duration.ms", Type: TypeInt, Default: "15000", Min: 1000, Max: 30000, Status: StatusImplemented, Doc: "Least share.record.lock.duration.ms a group config may set."},
	{Name: "group.share.max.record.lock.duration.ms", Type: TypeInt, Default: "60000", Min: 30000, Max: 3600000, Status: StatusImplemented, Doc: "Greatest share.record.lock.duration.ms a group config may set."},
	{Name: "transaction.state.log.replication.factor", Type: TypeShort, Default: "3", Min: 1, Max: math.MaxInt16, Doc: "Replication factor of __transaction_state (capped at the number of live brokers when it is created)."},
	{Name: "transaction.state.log.min.isr", Type: TypeInt, Default: "2", Min: 1, Max: math.MaxInt32, Doc: "min.insync.replicas of __transaction_state (capped at its replication factor)."},
	{Name: "transaction.state.log.num.partitions", Type: TypeInt, Default: "50", Min: 1, Max: math.MaxInt32, Doc: "Partitions of __transaction_state."},
	{Name: "transaction.state.log.segment.bytes", Type: TypeInt, Default: "104857600", Min: 1, Max: math.MaxInt32, Doc: "segment.bytes of __transaction_state."},
	{Name: "transaction.max.timeout.ms", Type: TypeInt, Default: "900000", Min: 1, Max: math.MaxInt32, Doc: "Largest transaction.timeout.ms a transactional producer may ask for (InitProducerId answers INVALID_TRANSACTION_TIMEOUT above it)."},
	{Name: "transaction.partition.verification.enable", Type: TypeBoolean, Default: "true", Doc: "Before a transactional producer's first batch of a transaction is appended to a partition, its leader asks the transaction coordinator whether the partition is in the ongoing transaction (KIP-890 part 1, AddPartitionsToTxn VerifyOnly): a late batch of a transaction that already ended is refused (INVALID_TXN_STATE) instead of opening a transaction no marker ends (a hanging transaction that holds the last stable offset back)."},
	{Name: "sluice.transaction.version", Type: TypeInt, Default: "2", Min: 1, Max: 2, Doc: "sluice only (Kafka finalizes the transaction.version feature with kafka-features.sh): the transaction.version level ApiVersions advertises as finalized. 2 (Kafka 4.0's default, KIP-890 part 2): clients that support it let Produce v12 and TxnOffsetCommit v5 add partitions to the transaction implicitly, and EndTxn v5 bumps the producer epoch at every end; version 1 is still served to clients that do not. 1: not advertised, every client uses AddPartitionsToTxn and AddOffsetsToTxn."},
	{Name: "transactional.id.expiration.ms", Type: TypeInt, Default: "604800000", Min: 1, Max: math.MaxInt32, Doc: "A transactional id with no transaction in progress and no request for this many milliseconds is removed from __transaction_state."},
	{Name: "transaction.abort.timed.out.transaction.cleanup.interval.ms", Type: TypeInt, Default: "10000", Min: 1, Max: math.MaxInt32, Doc: "How often the transaction coordinator aborts transactions open longer than their timeout."},
	{Name: "transaction.remove.expired.transaction.cleanup.interval.ms", Type: TypeInt, Default: "3600000", Min: 1, Max: math.MaxInt32, Doc: "How often the transaction coordinator removes expired transactional ids."},
	{Name: "producer.id.expiration.ms", Type: TypeInt, Default: "86400000", Min: 1, Max: math.MaxInt32, Doc: "Idempotent producer state expires after this many milliseconds without a write (by its last batch's max timestamp): the producer's next batch is checked as a new producer's."},
	{Name: "producer.id.expiration.check.interval.ms", Type: TypeInt, Default: "600000", Min: 1, Max: math.MaxInt32, Doc: "How often each partition looks for expired producer ids."},
	{Name: "share.coordinator.state.topic.replication.factor", Type: TypeShort, Default: "3", Min: 1, Max: math.MaxInt16, Doc: "Replication factor of __share_group_state, the share coordinator's topic (KIP-932; capped at the number of live brokers when it is created)."},
	{Name: "share.coordinator.state.topic.min.isr", Type: TypeShort, Default: "2", Min: 1, Max: math.MaxInt16, Doc: "min.insync.replicas of __share_group_state (capped at its replication factor)."},
	{Name: "share.coordinator.state.topic.num.partitions", Type: TypeInt, Default: "50", Min: 1, Max: math.MaxInt32, Doc: "Partitions of __share_group_state."},
	{Name: "share.coordinator.state.topic.prune.interval.ms", Type: TypeLong, Default: "300000", Min: 0, Max: math.MaxInt32, Doc: "How often the share coordinator deletes the records of __share_group_state below the last snapshot of every share partition, first writing a new snapshot of each share partition not written since the previous prune (Kafka's internal config of that name, with share.coordinator.cold.partition.snapshot.interval.ms); 0 never prunes."},
	{Name: "share.coordinator.state.topic.segment.bytes", Type: TypeInt, Default: "104857600", Min: 1, Max: math.MaxInt32, Doc: "segment.bytes of __share_group_state."},

	{Name: "metric.reporters", Type: TypeList, Default: "", Status: StatusIgnored, Doc: "sluice exports Prometheus metrics on /metrics of the --http listener."},
}

var securityProtocols = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}

var brokerDefByName = func() map[string]*Def {
	m := make(map[string]*Def, len(BrokerDefs)+len(TopicDefs))
	for i := range BrokerDefs {
		m[BrokerDefs[i].Name] = &BrokerDefs[i]
	}
	for i := range TopicDefs {
		td := &TopicDefs[i]
		if td.BrokerName == "" {
			continue
		}
		if _, dup := m[td.BrokerName]; dup {
			panic("config: " + td.BrokerName + " is both a broker def and a topic-default synonym")
		}
		d := *td
		d.Name = td.BrokerName
		d.Synonym = td.Name
		if d.Doc == "" {
			d.Doc = "Default of the topic config " + td.Name + "."
		} else {
			d.Doc = "Default of the topic config " + td.Name + ": " + d.Doc
		}
		m[d.Name] = &d
	}
	return m
}()

// BrokerDef returns the definition of a broker setting: an entry of
// BrokerDefs, or the topic-default synonym of a topic config (e.g.
// log.retention.ms for retention.ms, with retention.ms's rule).
func BrokerDef(name string) (*Def, bool) {
	d, ok := brokerDefByName[name]
	return d, ok
}

// AllBrokerDefs returns every known broker setting, sorted by name.
func AllBrokerDefs() []*Def {
	out := make([]*Def, 0, len(brokerDefByName))
	for _, d := range brokerDefByName {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// knownBrokerPrefix reports whether name belongs to a family of Kafka
// settings that take a variable part (per-listener and per-mechanism
// overrides): they are accepted without a definition (a per-listener
// override of a known setting is validated by its rule).
func knownBrokerPrefix(name string) bool {
	// <mechanism>.sasl.jaas.config: a mechanism's JAAS configuration.
	return strings.HasPrefix(name, "listener.name.") || strings.HasSuffix(name, ".sasl.jaas.config")
}

// ValidateBrokerProps checks every known setting of props against its
// definition and returns the first error in name order (naming the key,
// the value and what is expected). Unknown keys are not errors; see
// UnknownBrokerKeys.
func ValidateBrokerProps(props map[string]string) error {
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if d, ok := BrokerDef(k); ok {
			if err := d.Validate(props[k]); err != nil {
				return err
			}
		} else if _, d, ok := listenerOverride(k); ok {
			// A per-listener override follows its setting's rule.
			o := *d
			o.Name = k
			if err := o.Validate(props[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

// UnknownBrokerKeys returns, sorted, the keys of props that are not known
// broker settings. Kafka logs each as "The configuration 'k' was supplied
// but isn't a known config." and starts anyway.
func UnknownBrokerKeys(props map[string]string) []string {
	var out []string
	for k := range props {
		if _, ok := BrokerDef(k); !ok && !knownBrokerPrefix(k) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// CheckHostPort checks a host:port address (an empty host means every
// interface) with a port in [0, 65535].
func CheckHostPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("expected host:port")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("expected host:port with a port in [0, 65535]")
	}
	return nil
}

func listElems(v string) []string {
	var out []string
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

func checkVoters(v string) error {
	if _, err := ParseVoters(v); err != nil {
		return fmt.Errorf("expected a list of id@host:port (%v)", err)
	}
	return nil
}

// checkConnOverrides checks max.connections.per.ip.overrides:
// host:count,... with a non-negative count.
func checkConnOverrides(v string) error {
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		i := strings.LastIndexByte(e, ':')
		if i <= 0 {
			return fmt.Errorf("%q is not host:count", e)
		}
		if n, err := strconv.Atoi(e[i+1:]); err != nil || n < 0 {
			return fmt.Errorf("%q: count must be a non-negative integer", e)
		}
	}
	return nil
}

func checkHostPorts(v string) error {
	for _, e := range listElems(v) {
		if err := CheckHostPort(e); err != nil {
			return fmt.Errorf("expected a list of host:port (%q: %v)", e, err)
		}
	}
	return nil
}

func checkListeners(v string) error {
	seen := map[string]bool{}
	for _, e := range listElems(v) {
		name, addr, ok := strings.Cut(e, "://")
		if !ok || name == "" {
			return fmt.Errorf("expected a list of NAME://host:port (%q has no listener name)", e)
		}
		if err := CheckHostPort(addr); err != nil {
			return fmt.Errorf("expected a list of NAME://host:port (%q: %v)", e, err)
		}
		if seen[strings.ToUpper(name)] {
			return fmt.Errorf("expected each listener name once (%s appears twice)", name)
		}
		seen[strings.ToUpper(name)] = true
	}
	return nil
}

func checkProtocolMap(v string) error {
	for _, e := range listElems(v) {
		name, proto, ok := strings.Cut(e, ":")
		if !ok || name == "" {
			return fmt.Errorf("expected a list of NAME:PROTOCOL (%q)", e)
		}
		found := false
		for _, p := range securityProtocols {
			if strings.EqualFold(p, strings.TrimSpace(proto)) {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("expected a list of NAME:PROTOCOL with PROTOCOL one of %s (%q)", strings.Join(securityProtocols, ", "), e)
		}
	}
	return nil
}
