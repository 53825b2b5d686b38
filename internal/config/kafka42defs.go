package config

import (
	"math"
	"slices"
)

// kafka42Defs are the Kafka 4.2 broker settings (KafkaConfig's ConfigDef,
// testdata/kafka-4.2-broker-keys.txt) of mechanisms sluice does not have:
// tuning of Kafka's thread pools, purgatories, share and streams groups,
// the metadata log's snapshots, tiered storage, and the broker's own OAuth
// client, accepted and ignored with a warning; and the ones that would
// change membership, durability, security or where data lives, refused
// at start unless left at their default. Types and defaults are Kafka's.
var kafka42Defs = slices.Concat(kafka42Ignored, kafka42Refused, remoteLogDefs)

var kafka42Ignored = []Def{
	// Transactions and coordinators (TransactionLogConfig,
	// TransactionStateManagerConfig, GroupCoordinatorConfig,
	// ShareCoordinatorConfig).
	{Name: "add.partitions.to.txn.retry.backoff.max.ms", Type: TypeInt, Default: "100", Min: 0, Max: math.MaxInt32, Status: StatusIgnored, Doc: "sluice's leaders verify a transaction's partition (AddPartitionsToTxn VerifyOnly) without Kafka's retry loop."},
	{Name: "add.partitions.to.txn.retry.backoff.ms", Type: TypeInt, Default: "20", Min: 1, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "transaction.state.log.load.buffer.size", Type: TypeInt, Default: "5242880", Min: 1, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "offsets.load.buffer.size", Type: TypeInt, Default: "5242880", Min: 1, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "offsets.topic.compression.codec", Type: TypeInt, Default: "0", Status: StatusIgnored, Doc: "Committed offsets are written uncompressed."},
	{Name: "group.coordinator.threads", Type: TypeInt, Default: "4", Min: 1, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "group.coordinator.append.linger.ms", Type: TypeInt, Default: "-1", Min: -1, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "group.consumer.assignors", Type: TypeList, Default: "uniform,range", Status: StatusImplemented, Doc: "Server-side assignors of KIP-848 consumer groups, the first the default (uniform and range; other names are ignored)."},
	{Name: "group.consumer.max.size", Type: TypeInt, Default: "2147483647", Min: 1, Max: math.MaxInt32, Status: StatusImplemented, Doc: "Most members of a KIP-848 consumer group (GROUP_MAX_SIZE_REACHED)."},
	{Name: "group.consumer.migration.policy", Type: TypeString, Default: "bidirectional", Enum: []string{"bidirectional", "upgrade", "downgrade", "disabled"}, Status: StatusImplemented, Doc: "Online conversion of groups with members (KIP-848): bidirectional, upgrade (a classic group converts when a consumer-protocol member joins), downgrade (a consumer group of classic members converts back when its last consumer-protocol member leaves) or disabled. Empty groups convert whatever the policy, as Kafka."},
	{Name: "group.share.assignors", Type: TypeList, Default: "simple", Check: checkShareAssignors, Form: "simple (or its class name)", Doc: "The server assignor of share groups (KIP-932): Kafka's simple assignor, the only one, spreading each subscribed topic's partitions over the members subscribing to it, a partition to several members when they outnumber the partitions."},
	{Name: "group.share.delivery.count.limit", Type: TypeInt, Default: "5", Min: 2, Max: 10, Status: StatusImplemented, Doc: "Default of the group config share.delivery.count.limit: how many times a share group's record is delivered before it is archived."},
	{Name: "group.share.max.share.sessions", Type: TypeInt, Default: "2000", Min: 1, Max: math.MaxInt32, Status: StatusImplemented, Doc: "The most share sessions (KIP-932) a broker holds; more are SHARE_SESSION_LIMIT_REACHED."},
	{Name: "group.share.max.size", Type: TypeInt, Default: "200", Min: 1, Max: 1000, Doc: "Most members of one share group: a ShareGroupHeartbeat joining a full group answers GROUP_MAX_SIZE_REACHED."},
	{Name: "group.share.partition.max.record.locks", Type: TypeInt, Default: "2000", Min: 100, Max: 10000, Status: StatusImplemented, Doc: "The most in-flight offsets (SPEO - SPSO) of one share partition."},
	{Name: "group.streams.heartbeat.interval.ms", Type: TypeInt, Default: "5000", Min: 1, Max: math.MaxInt32, Status: StatusIgnored, Doc: "Streams groups (KIP-1071) are not implemented."},
	{Name: "group.streams.initial.rebalance.delay.ms", Type: TypeInt, Default: "3000", Min: 0, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "group.streams.max.heartbeat.interval.ms", Type: TypeInt, Default: "15000", Min: 1, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "group.streams.max.session.timeout.ms", Type: TypeInt, Default: "60000", Min: 1, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "group.streams.max.size", Type: TypeInt, Default: "2147483647", Min: 1, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "group.streams.max.standby.replicas", Type: TypeInt, Default: "2", Min: 0, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "group.streams.min.heartbeat.interval.ms", Type: TypeInt, Default: "5000", Min: 1, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "group.streams.min.session.timeout.ms", Type: TypeInt, Default: "45000", Min: 1, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "group.streams.num.standby.replicas", Type: TypeInt, Default: "0", Min: 0, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "group.streams.session.timeout.ms", Type: TypeInt, Default: "45000", Min: 1, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "share.coordinator.append.linger.ms", Type: TypeInt, Default: "-1", Min: -1, Max: math.MaxInt32, Status: StatusIgnored, Doc: "The share coordinator appends each write as one batch at once."},
	{Name: "share.coordinator.load.buffer.size", Type: TypeInt, Default: "5242880", Min: 1, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "share.coordinator.snapshot.update.records.per.snapshot", Type: TypeInt, Default: "500", Min: 0, Max: math.MaxInt32, Status: StatusImplemented, Doc: "Update records the share coordinator writes for a share partition between two snapshot records of its whole state in __share_group_state."},
	{Name: "share.coordinator.state.topic.compression.codec", Type: TypeInt, Default: "0", Status: StatusIgnored},
	{Name: "share.coordinator.threads", Type: TypeInt, Default: "1", Min: 1, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "share.coordinator.write.timeout.ms", Type: TypeInt, Default: "5000", Min: 1, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "share.fetch.purgatory.purge.interval.requests", Type: TypeInt, Default: "1000", Status: StatusIgnored},
	{Name: "max.request.partition.size.limit", Type: TypeInt, Default: "2000", Min: 1, Max: math.MaxInt32, Status: StatusIgnored, Doc: "Partitions served in one share fetch; share groups are not implemented."},

	// Request handling and the socket server (ServerConfigs,
	// SocketServerConfigs, QuotaConfig).
	{Name: "delete.records.purgatory.purge.interval.requests", Type: TypeInt, Default: "1", Status: StatusIgnored, Doc: "sluice has no purgatories: a waiting request is woken when its condition changes."},
	{Name: "fetch.purgatory.purge.interval.requests", Type: TypeInt, Default: "1000", Status: StatusIgnored},
	{Name: "producer.purgatory.purge.interval.requests", Type: TypeInt, Default: "1000", Status: StatusIgnored},
	{Name: "queued.max.request.bytes", Type: TypeLong, Default: "-1", Status: StatusIgnored},
	{Name: "request.timeout.ms", Type: TypeInt, Default: "30000", Status: StatusIgnored, Doc: "Timeout of the broker's own client requests; sluice's internal clients use their own timeouts."},
	{Name: "socket.connection.setup.timeout.ms", Type: TypeLong, Default: "10000", Status: StatusIgnored},
	{Name: "socket.connection.setup.timeout.max.ms", Type: TypeLong, Default: "30000", Status: StatusIgnored},
	{Name: "controller.socket.timeout.ms", Type: TypeInt, Default: "30000", Status: StatusIgnored},
	{Name: "early.start.listeners", Type: TypeList, Default: "", Status: StatusIgnored, Doc: "sluice opens its listeners once it can authorize requests."},
	{Name: "initial.broker.registration.timeout.ms", Type: TypeInt, Default: "60000", Status: StatusIgnored},
	{Name: "controller.quota.window.num", Type: TypeInt, Default: "11", Min: 1, Max: math.MaxInt32, Status: StatusIgnored, Doc: "Controller mutation quotas are not implemented."},
	{Name: "controller.quota.window.size.seconds", Type: TypeInt, Default: "1", Min: 1, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "client.quota.callback.class", Type: TypeClass, Default: "", Status: StatusIgnored, Doc: "Client quotas are applied by user and client id as Kafka's default callback does; a custom callback is not loaded."},
	{Name: "telemetry.max.bytes", Type: TypeInt, Default: "1048576", Min: 1, Max: math.MaxInt32, Status: StatusIgnored, Doc: "Client telemetry (KIP-714) is not collected."},

	// Log directories and the log (ServerLogConfigs, CleanerConfig).
	{Name: "num.replica.alter.log.dirs.threads", Type: TypeInt, Default: "", Status: StatusIgnored, Doc: "sluice keeps one log directory: replicas never move between directories."},
	{Name: "alter.log.dirs.replication.quota.window.num", Type: TypeInt, Default: "11", Min: 1, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "alter.log.dirs.replication.quota.window.size.seconds", Type: TypeInt, Default: "1", Min: 1, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "log.dir.failure.timeout.ms", Type: TypeLong, Default: "30000", Min: 1, Max: math.MaxInt64, Status: StatusIgnored, Doc: "A failed write or fsync halts the broker at once (docs/storage.md)."},
	{Name: "compression.gzip.level", Type: TypeInt, Default: "-1", Min: -1, Max: 9, Status: StatusIgnored, Doc: "The leader recompresses with the codec's default level."},
	{Name: "compression.lz4.level", Type: TypeInt, Default: "9", Min: 1, Max: 17, Status: StatusIgnored},
	{Name: "compression.zstd.level", Type: TypeInt, Default: "3", Min: -131072, Max: 22, Status: StatusIgnored},

	// The metadata log (KRaftConfigs, QuorumConfig).
	{Name: "metadata.log.max.record.bytes.between.snapshots", Type: TypeLong, Default: "20971520", Min: 1, Max: math.MaxInt64, Status: StatusIgnored, Doc: "sluice's controller snapshots its metadata log by its own rule."},
	{Name: "metadata.log.max.snapshot.interval.ms", Type: TypeLong, Default: "3600000", Min: 0, Max: math.MaxInt64, Status: StatusIgnored},
	{Name: "metadata.log.segment.bytes", Type: TypeInt, Default: "1073741824", Min: 8388608, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "metadata.log.segment.ms", Type: TypeLong, Default: "604800000", Status: StatusIgnored},
	{Name: "metadata.max.retention.bytes", Type: TypeLong, Default: "104857600", Status: StatusIgnored},
	{Name: "metadata.max.retention.ms", Type: TypeLong, Default: "604800000", Status: StatusIgnored},
	{Name: "metadata.max.idle.interval.ms", Type: TypeInt, Default: "500", Min: 0, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "controller.quorum.append.linger.ms", Type: TypeInt, Default: "25", Min: 0, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "controller.quorum.request.timeout.ms", Type: TypeInt, Default: "2000", Min: 0, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "controller.quorum.retry.backoff.ms", Type: TypeInt, Default: "20", Min: 0, Max: math.MaxInt32, Status: StatusIgnored},

	// Metrics (MetricConfigs).
	{Name: "kafka.metrics.polling.interval.secs", Type: TypeInt, Default: "10", Min: 1, Max: math.MaxInt32, Status: StatusIgnored, Doc: "sluice exports Prometheus metrics on /metrics of the --http listener."},
	{Name: "kafka.metrics.reporters", Type: TypeList, Default: "", Status: StatusIgnored},
	{Name: "metrics.num.samples", Type: TypeInt, Default: "2", Min: 1, Max: math.MaxInt32, Status: StatusIgnored},
	{Name: "metrics.recording.level", Type: TypeString, Default: "INFO", Status: StatusIgnored},
	{Name: "metrics.sample.window.ms", Type: TypeLong, Default: "30000", Min: 1, Max: math.MaxInt64, Status: StatusIgnored},

	// The broker's own SASL login and OAuth client (SaslConfigs): used by
	// Kafka's inter-broker client with OAUTHBEARER or a custom login
	// module, neither of which sluice's inter-broker client has
	// (sasl.mechanism.inter.broker.protocol).
	{Name: "sasl.login.connect.timeout.ms", Type: TypeInt, Default: "", Status: StatusIgnored, Doc: "The broker's own login has no external provider."},
	{Name: "sasl.login.read.timeout.ms", Type: TypeInt, Default: "", Status: StatusIgnored},
	{Name: "sasl.login.retry.backoff.ms", Type: TypeLong, Default: "100", Status: StatusIgnored},
	{Name: "sasl.login.retry.backoff.max.ms", Type: TypeLong, Default: "10000", Status: StatusIgnored},
	{Name: "sasl.oauthbearer.assertion.algorithm", Type: TypeString, Default: "RS256", Status: StatusIgnored, Doc: "The broker's own OAuth client (inter-broker OAUTHBEARER) is not implemented; these settings only configure it."},
	{Name: "sasl.oauthbearer.assertion.claim.aud", Type: TypeString, Default: "", Status: StatusIgnored},
	{Name: "sasl.oauthbearer.assertion.claim.exp.seconds", Type: TypeInt, Default: "300", Min: 0, Max: 86400, Status: StatusIgnored},
	{Name: "sasl.oauthbearer.assertion.claim.iss", Type: TypeString, Default: "", Status: StatusIgnored},
	{Name: "sasl.oauthbearer.assertion.claim.jti.include", Type: TypeBoolean, Default: "false", Status: StatusIgnored},
	{Name: "sasl.oauthbearer.assertion.claim.nbf.seconds", Type: TypeInt, Default: "60", Min: 0, Max: 3600, Status: StatusIgnored},
	{Name: "sasl.oauthbearer.assertion.claim.sub", Type: TypeString, Default: "", Status: StatusIgnored},
	{Name: "sasl.oauthbearer.assertion.file", Type: TypeString, Default: "", Status: StatusIgnored},
	{Name: "sasl.oauthbearer.assertion.private.key.file", Type: TypeString, Default: "", Status: StatusIgnored},
	{Name: "sasl.oauthbearer.assertion.private.key.passphrase", Type: TypePassword, Default: "", Status: StatusIgnored},
	{Name: "sasl.oauthbearer.assertion.template.file", Type: TypeString, Default: "", Status: StatusIgnored},
	{Name: "sasl.oauthbearer.client.credentials.client.id", Type: TypeString, Default: "", Status: StatusIgnored},
	{Name: "sasl.oauthbearer.client.credentials.client.secret", Type: TypePassword, Default: "", Status: StatusIgnored},
	{Name: "sasl.oauthbearer.jwt.retriever.class", Type: TypeClass, Default: "org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever", Status: StatusIgnored},
	{Name: "sasl.oauthbearer.scope", Type: TypeString, Default: "", Status: StatusIgnored},
	{Name: "sasl.oauthbearer.token.endpoint.url", Type: TypeString, Default: "", Status: StatusIgnored},
	{Name: "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", Type: TypeLong, Default: "100", Status: StatusIgnored, Doc: "The key set is read again at most once a second (sasl.oauthbearer.jwks.endpoint.url)."},
	{Name: "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", Type: TypeLong, Default: "10000", Status: StatusIgnored},

	// JVM TLS plumbing (SslConfigs): Go's crypto/tls has no key or trust
	// manager factories, providers or SecureRandom choice.
	{Name: "ssl.keymanager.algorithm", Type: TypeString, Default: "SunX509", Status: StatusIgnored, Doc: "A JVM setting; Go's TLS has no key manager factory."},
	{Name: "ssl.trustmanager.algorithm", Type: TypeString, Default: "PKIX", Status: StatusIgnored, Doc: "A JVM setting; certificates are verified by Go's X.509 (PKIX) verifier."},
	{Name: "ssl.provider", Type: TypeString, Default: "", Status: StatusIgnored, Doc: "A JVM setting; Go's crypto/tls is used."},
	{Name: "ssl.secure.random.implementation", Type: TypeString, Default: "", Status: StatusIgnored, Doc: "A JVM setting; Go's crypto/rand is used."},
	{Name: "ssl.allow.dn.changes", Type: TypeBoolean, Default: "false", Status: StatusIgnored, Doc: "A reloaded key store (ssl.keystore.location) is used whatever its certificate's subject."},
	{Name: "ssl.allow.san.changes", Type: TypeBoolean, Default: "false", Status: StatusIgnored},
}

// kafka42Refused are the Kafka 4.2 settings whose non-default values ask
// for a mechanism sluice does not implement and that would change the
// cluster's membership, durability or security if ignored.
var kafka42Refused = []Def{
	{Name: "controller.quorum.auto.join.enable", Type: TypeBoolean, Default: "false", Status: StatusRefused, Refuse: refuseTrue("a controller joining the voters by itself (KIP-853 auto-join)"), Refuses: "true", Doc: "The voters are controller.quorum.voters (--voters); sluice's controllers never join them by themselves."},
	{Name: "transaction.two.phase.commit.enable", Type: TypeBoolean, Default: "false", Status: StatusRefused, Refuse: refuseTrue("two-phase commit with an external transaction coordinator (KIP-939)"), Refuses: "true", Doc: "KIP-939 two-phase commit transactions are not implemented."},
	{Name: "delegation.token.secret.key", Type: TypePassword, Default: "", Status: StatusRefused, Refuse: refuseUnlessEmpty("delegation token authentication (KIP-48)"), Refuses: "any non-empty key", Doc: "A key enables delegation tokens in Kafka; sluice does not implement them (CreateDelegationToken is not served)."},
	{Name: "delegation.token.expiry.time.ms", Type: TypeLong, Default: "86400000", Min: 1, Max: math.MaxInt64, Status: StatusIgnored, Doc: "Delegation tokens are not implemented (delegation.token.secret.key)."},
	{Name: "delegation.token.max.lifetime.ms", Type: TypeLong, Default: "604800000", Min: 1, Max: math.MaxInt64, Status: StatusIgnored},
	{Name: "delegation.token.expiry.check.interval.ms", Type: TypeLong, Default: "3600000", Min: 1, Max: math.MaxInt64, Status: StatusIgnored},
	{Name: "alter.config.policy.class.name", Type: TypeClass, Default: "", Status: StatusRefused, Refuse: refuseUnlessEmpty("an AlterConfigPolicy class"), Refuses: "any class", Doc: "A policy that vets config changes; sluice runs no policy classes, so every valid change would pass."},
	{Name: "create.topic.policy.class.name", Type: TypeClass, Default: "", Status: StatusRefused, Refuse: refuseUnlessEmpty("a CreateTopicPolicy class"), Refuses: "any class", Doc: "A policy that vets topic creation; sluice runs no policy classes."},
	{Name: "config.providers", Type: TypeList, Default: "", Status: StatusRefused, Refuse: refuseUnlessEmpty("ConfigProvider indirection (KIP-297, ${provider:path:key} values)"), Refuses: "any provider", Doc: "sluice reads every value literally: a ${provider:...} reference would be taken as the secret itself."},
	{Name: "security.providers", Type: TypeString, Default: "", Status: StatusRefused, Refuse: refuseUnlessEmpty("a custom security provider (SecurityProviderCreator)"), Refuses: "any class", Doc: "Security algorithms are Go's crypto."},
	{Name: "ssl.engine.factory.class", Type: TypeClass, Default: "", Status: StatusRefused, Refuse: refuseOtherThan("a custom SslEngineFactory", "org.apache.kafka.common.security.ssl.DefaultSslEngineFactory"), Refuses: "any class but DefaultSslEngineFactory", Doc: "TLS is Go's crypto/tls with the ssl.* settings."},
	{Name: "sasl.server.callback.handler.class", Type: TypeClass, Default: "", Status: StatusRefused, Refuse: refuseUnlessEmpty("a custom SASL server callback handler (it decides who authenticates)"), Refuses: "any class", Doc: "Credentials are checked as the built-in mechanisms do (sasl.jaas.config, SCRAM credentials, the JWKS)."},
	{Name: "sasl.login.class", Type: TypeClass, Default: "", Status: StatusRefused, Refuse: refuseUnlessEmpty("a custom SASL Login class"), Refuses: "any class", Doc: "The broker's own login is the built-in one of its mechanism."},
	{Name: "sasl.login.callback.handler.class", Type: TypeClass, Default: "", Status: StatusRefused, Refuse: refuseUnlessEmpty("a custom SASL login callback handler"), Refuses: "any class"},
	{Name: "sasl.client.callback.handler.class", Type: TypeClass, Default: "", Status: StatusRefused, Refuse: refuseUnlessEmpty("a custom SASL client callback handler"), Refuses: "any class"},
	{Name: "sasl.oauthbearer.jwt.validator.class", Type: TypeClass, Default: "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator", Refuse: refuseOtherThan("a custom JwtValidator", "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator", "org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator"), Refuses: "any class but DefaultJwtValidator and BrokerJwtValidator", Doc: "OAUTHBEARER tokens are validated as Kafka's BrokerJwtValidator does: signature by the JWKS, exp, nbf, sasl.oauthbearer.expected.audience and .issuer, the sub claim."},
	{Name: "zookeeper.connect", Type: TypeString, Default: "", Status: StatusRefused, Refuse: refuseUnlessEmpty("ZooKeeper mode (removed in Kafka 4.0; a node listing a ZooKeeper ensemble expects to join its cluster)"), Refuses: "any ensemble", Doc: "Not a Kafka 4 key (ZooKeeper mode was removed in 4.0, where it is unknown and Kafka then fails for want of process.roles). sluice refuses it rather than start a single-node cluster of its own: list the quorum in controller.quorum.voters."},
}

// remoteLogDefs are tiered storage's settings (RemoteLogManagerConfig,
// KIP-405): remote.log.storage.system.enable=true turns it on for the
// broker, with the object store in sluice.remote.storage.* (remotedefs.go)
// and each topic opting in with remote.storage.enable. sluice's remote
// storage and metadata managers are built in: the class settings accept
// only their default (another class would put the data elsewhere).
var remoteLogDefs = []Def{
	{Name: "remote.log.storage.system.enable", Type: TypeBoolean, Default: "false", Doc: "Tiered storage (KIP-405) on this broker: topics with remote.storage.enable=true copy their rolled segments to the object store named by sluice.remote.storage.* (sluice.remote.storage.bucket is then required) and keep locally only what local.retention.* allows (docs/tiered-storage.md). An unreachable store does not stop the broker: it logs an alarm and uploads retry."},
	{Name: "remote.fetch.max.wait.ms", Type: TypeInt, Default: "500", Min: 1, Max: math.MaxInt32, Doc: "Longest a fetch that reads from remote storage waits for it before answering with what it has (Kafka's DelayedRemoteFetch)."},
	{Name: "remote.list.offsets.request.timeout.ms", Type: TypeLong, Default: "30000", Min: 1, Max: math.MaxInt64, Doc: "Longest a ListOffsets by timestamp that reads remote indexes waits for them (KIP-1075)."},
	{Name: "remote.log.index.file.cache.total.size.bytes", Type: TypeLong, Default: "1073741824", Min: 1, Max: math.MaxInt64, Doc: "Bytes of local disk for the remote segments' indexes (offset, time, transaction) fetched for remote reads, kept as files in remote-log-index-cache in the data directory across restarts, least recently used deleted first (Kafka's RemoteIndexCache); the indexes parsed in memory are held within the same bound."},
	{Name: "remote.log.manager.copier.thread.pool.size", Type: TypeInt, Default: "10", Min: 1, Max: math.MaxInt32, Doc: "Segment uploads run at once on this broker, over its leader partitions (Kafka's RLMCopyTask pool)."},
	{Name: "remote.log.manager.copy.max.bytes.per.second", Type: TypeLong, Default: maxLong, Min: 1, Max: math.MaxInt64, Doc: "Upload quota of this broker in bytes per second, over copy.quota.window.num windows of copy.quota.window.size.seconds (KIP-956); an upload over it waits."},
	{Name: "remote.log.manager.copy.quota.window.num", Type: TypeInt, Default: "11", Min: 1, Max: math.MaxInt32, Doc: "Samples the upload quota's rate is measured over."},
	{Name: "remote.log.manager.copy.quota.window.size.seconds", Type: TypeInt, Default: "1", Min: 1, Max: math.MaxInt32, Doc: "Length of one upload quota sample, in seconds."},
	{Name: "remote.log.manager.expiration.thread.pool.size", Type: TypeInt, Default: "10", Min: 1, Max: math.MaxInt32, Doc: "Remote segment expirations (retention.*, log start) run at once on this broker (Kafka's RLMExpirationTask pool)."},
	{Name: "remote.log.manager.fetch.max.bytes.per.second", Type: TypeLong, Default: maxLong, Min: 1, Max: math.MaxInt64, Doc: "Remote read quota of this broker in bytes per second, over fetch.quota.window.num windows of fetch.quota.window.size.seconds (KIP-956); over it, fetches get no remote data until the rate falls."},
	{Name: "remote.log.manager.fetch.quota.window.num", Type: TypeInt, Default: "11", Min: 1, Max: math.MaxInt32, Doc: "Samples the remote read quota's rate is measured over."},
	{Name: "remote.log.manager.fetch.quota.window.size.seconds", Type: TypeInt, Default: "1", Min: 1, Max: math.MaxInt32, Doc: "Length of one remote read quota sample, in seconds."},
	{Name: "remote.log.manager.follower.thread.pool.size", Type: TypeInt, Default: "2", Min: 1, Max: math.MaxInt32, Doc: "Followers' remote work at once (Kafka's RLMFollowerTask pool): following the uploads of their leaders."},
	{Name: "remote.log.manager.thread.pool.size", Type: TypeInt, Default: "2", Min: 1, Max: math.MaxInt32, Doc: "Kafka's older single pool of remote log tasks; in Kafka 4 the copier, expiration and follower pools replace it, and so in sluice."},
	{Name: "remote.log.manager.task.retry.backoff.ms", Type: TypeLong, Default: "500", Min: 1, Max: math.MaxInt64, Doc: "The first wait before a failed copy or expiration of a partition's remote log is tried again; it doubles on every failure up to remote.log.manager.task.retry.backoff.max.ms."},
	{Name: "remote.log.manager.task.retry.backoff.max.ms", Type: TypeLong, Default: "30000", Min: 1, Max: math.MaxInt64, Doc: "The longest wait between retries of a failing copy or expiration (see remote.log.manager.task.retry.backoff.ms)."},
	{Name: "remote.log.manager.task.interval.ms", Type: TypeLong, Default: "30000", Min: 1, Max: math.MaxInt64, Doc: "How often each leader partition looks for segments to upload and remote segments to expire; a failed upload is retried at the next run, with backoff."},
	{Name: "remote.log.metadata.custom.metadata.max.bytes", Type: TypeInt, Default: "128", Min: 0, Max: math.MaxInt32, Doc: "Largest custom metadata a remote storage manager may attach to a segment's metadata (KIP-917); sluice's attaches none."},
	{Name: "remote.log.metadata.manager.class.name", Type: TypeString, Default: "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager", Status: StatusRefused, Refuse: refuseOtherThan("a custom RemoteLogMetadataManager", "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager", "TopicBasedRemoteLogMetadataManager"), Refuses: "any class but TopicBasedRemoteLogMetadataManager", Doc: "The remote segments' metadata is kept as Kafka's TopicBasedRemoteLogMetadataManager keeps it, in the __remote_log_metadata topic (remote.log.metadata.topic.*)."},
	{Name: "remote.log.metadata.manager.class.path", Type: TypeString, Default: "", Status: StatusIgnored, Doc: "No class is loaded."},
	{Name: "remote.log.metadata.manager.impl.prefix", Type: TypeString, Default: "rlmm.config.", Doc: "Prefix of the metadata manager's own settings: <prefix>remote.log.metadata.topic.num.partitions and the like are read as remote.log.metadata.topic.* (the unprefixed name wins)."},
	{Name: "remote.log.metadata.manager.listener.name", Type: TypeString, Default: "", Status: StatusIgnored, Doc: "The metadata topic is read and written in-process, through no listener."},
	{Name: "remote.log.reader.max.pending.tasks", Type: TypeInt, Default: "100", Min: 1, Max: math.MaxInt32, Doc: "Remote reads queued for the reader threads (Kafka's RemoteStorageThreadPool); a remote read past the queue is refused for that fetch."},
	{Name: "remote.log.reader.threads", Type: TypeInt, Default: "10", Min: 1, Max: math.MaxInt32, Doc: "Remote reads run at once on this broker."},
	{Name: "remote.log.storage.manager.class.name", Type: TypeString, Default: "", Status: StatusRefused, Refuse: refuseUnlessEmpty("a custom RemoteStorageManager"), Refuses: "any class", Doc: "sluice's remote storage manager is built in: an S3 client configured by sluice.remote.storage.*."},
	{Name: "remote.log.storage.manager.class.path", Type: TypeString, Default: "", Status: StatusIgnored, Doc: "No class is loaded."},
	{Name: "remote.log.storage.manager.impl.prefix", Type: TypeString, Default: "rsm.config.", Status: StatusIgnored, Doc: "sluice's remote storage manager takes its settings as sluice.remote.storage.*."},
}
