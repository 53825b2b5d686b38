#!/usr/bin/env node
// KafkaJS 2.2.4's transactional producer against a sluice cluster, driven
// by test/compat/txn_kafkajs_test.go.
//
//   node txn.js --brokers H:P,H:P --topic T --txn-id ID --prefix P \
//        --plan c1:commit,a1:abort,c2:commit --group G [--partitions 3] [--per-partition 10]
//
// One producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 })
// runs the plan: per transaction producer.transaction(), one txn.send with
// every record (record i of transaction S on partition p: key
// `S-p<p>-<iii>`, value `P-S-p<p>-<iii>`, to partitions 0.. in order),
// txn.sendOffsets (transaction number si commits offset 100*(si+1)+si for
// partition si of the topic in group G), then txn.commit() or txn.abort(). Each partition's batch must be acked at the
// offset its first record must have (each transaction's records follow the
// previous transaction's marker).
//
// Then the topic is read back at read_committed and at read_uncommitted
// with KafkaJS's own Fetch and its consumer's Batch, which drops control
// records and, from the fetch response's aborted transactions, aborted
// records (as its consumer does; the consumer itself would need a group):
// exactly the committed records (and the aborted ones), each once, at their
// offsets. The summary counts the aborted records Batch dropped per
// isolation level (a read_committed Fetch returns them with the list of
// aborted transactions). The topic is created by the caller.
//
// Prints one JSON line with a summary on success; exits 1 with the reason
// on stderr on failure.
'use strict'

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'

const { Kafka, logLevel } = require('kafkajs')
const { requests } = require('kafkajs/src/protocol/requests')
const Batch = require('kafkajs/src/consumer/batch')

// KafkaJS names FindCoordinator (key 10) GroupCoordinator.
const USED_APIS = {
  Produce: 0, Fetch: 1, Metadata: 3, GroupCoordinator: 10, InitProducerId: 22, AddPartitionsToTxn: 24,
  AddOffsetsToTxn: 25, EndTxn: 26, TxnOffsetCommit: 28,
}
const READ_UNCOMMITTED = 0
const READ_COMMITTED = 1

function parseArgs(argv) {
  const a = { partitions: 3, perPartition: 10, timeoutMs: 60000, debug: false }
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i]
    const v = () => {
      if (i + 1 >= argv.length) throw new Error(`missing value for ${k}`)
      return argv[++i]
    }
    switch (k) {
      case '--brokers': a.brokers = v().split(','); break
      case '--topic': a.topic = v(); break
      case '--txn-id': a.txnId = v(); break
      case '--prefix': a.prefix = v(); break
      case '--plan': a.plan = v(); break
      case '--group': a.group = v(); break
      case '--partitions': a.partitions = parseInt(v(), 10); break
      case '--per-partition': a.perPartition = parseInt(v(), 10); break
      case '--timeout-ms': a.timeoutMs = parseInt(v(), 10); break
      case '--debug': a.debug = true; break
      default: throw new Error(`unknown argument ${k}`)
    }
  }
  for (const k of ['brokers', 'topic', 'txnId', 'prefix', 'plan', 'group']) {
    if (a[k] === undefined) throw new Error(`--${k} is required`)
  }
  a.plan = a.plan.split(',').map(step => {
    const [name, verb] = step.split(':')
    if (verb !== 'commit' && verb !== 'abort') throw new Error(`bad plan step ${step}`)
    return { name, commit: verb === 'commit' }
  })
  return a
}

const pad = i => String(i).padStart(3, '0')
const keyOf = (step, p, i) => `${step}-p${p}-${pad(i)}`
const valueOf = (prefix, step, p, i) => `${prefix}-${step}-p${p}-${pad(i)}`

async function main() {
  const args = parseArgs(process.argv.slice(2))
  const offsetOf = (si, i) => si * (args.perPartition + 1) + i
  const problems = []
  const problem = msg => {
    problems.push(msg)
    if (problems.length >= 20) throw new Error(`too many problems:\n${problems.join('\n')}`)
  }

  const kafka = new Kafka({
    clientId: 'sluice-compat-kafkajs-txn',
    brokers: args.brokers,
    connectionTimeout: 5000,
    requestTimeout: 15000,
    // Bounded retries, so a failure ends with an error rather than the
    // overall timeout; KafkaJS warns that this "may invalidate EoS
    // guarantees" for an idempotent producer.
    retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 2000 },
    logLevel: args.debug ? logLevel.DEBUG : logLevel.WARN,
  })

  const producer = kafka.producer({
    transactionalId: args.txnId,
    idempotent: true,
    maxInFlightRequests: 1,
    allowAutoTopicCreation: false,
    transactionTimeout: 60000,
  })
  await producer.connect()
  let delivered = 0
  for (const [si, step] of args.plan.entries()) {
    const txn = await producer.transaction()
    const messages = []
    for (let p = 0; p < args.partitions; p++) {
      for (let i = 0; i < args.perPartition; i++) {
        messages.push({ partition: p, key: keyOf(step.name, p, i), value: valueOf(args.prefix, step.name, p, i) })
      }
    }
    const res = await txn.send({ topic: args.topic, acks: -1, timeout: 15000, messages })
    const acked = new Set()
    for (const r of res) {
      acked.add(r.partition)
      if (r.errorCode !== 0) problem(`transaction ${step.name}: partition ${r.partition} error code ${r.errorCode}`)
      if (Number(r.baseOffset) !== offsetOf(si, 0)) {
        problem(`transaction ${step.name}: partition ${r.partition} acked at base offset ${r.baseOffset}, want ${offsetOf(si, 0)}`)
      }
    }
    if (acked.size !== args.partitions) problem(`transaction ${step.name}: acks for partitions ${[...acked]}, want ${args.partitions}`)
    delivered += messages.length
    await txn.sendOffsets({
      consumerGroupId: args.group,
      topics: [{ topic: args.topic, partitions: [{ partition: si % args.partitions, offset: String(100 * (si + 1) + si) }] }],
    })
    if (step.commit) {
      await txn.commit()
    } else {
      await txn.abort()
    }
    if (txn.isActive()) problem(`transaction ${step.name}: still active after ${step.commit ? 'commit' : 'abort'}`)
    process.stderr.write(`txn.js: transaction ${step.name}: ${messages.length} records, ${step.commit ? 'committed' : 'aborted'}\n`)
  }
  await producer.disconnect()

  // Read back through the cluster object KafkaJS's consumer uses.
  const createCluster = Object.getOwnPropertySymbols(kafka)
    .find(s => s.description === 'private:Kafka:createCluster')
  if (!createCluster) throw new Error('kafkajs internals changed: no createCluster symbol')
  const cluster = kafka[createCluster]({ allowAutoTopicCreation: false })
  await cluster.connect()
  await cluster.addTargetTopic(args.topic)
  const partitionIds = [...Array(args.partitions).keys()]
  const leaders = cluster.findLeaderForPartitions(args.topic, partitionIds)
  const versions = {}
  for (const nodeId of Object.keys(leaders)) {
    const broker = await cluster.findBroker({ nodeId })
    // The version KafkaJS uses for each API: min(its newest, broker's max).
    for (const [name, key] of Object.entries(USED_APIS)) {
      const b = broker.versions[key]
      const mine = Math.max(...requests[name].versions.map(Number))
      versions[name] = b ? Math.min(mine, b.maxVersion) : 'not advertised'
    }
  }
  const last = offsetOf(args.plan.length - 1, args.perPartition - 1)
  const counts = {}
  const filtered = { read_committed: 0, read_uncommitted: 0 } // aborted records Batch dropped
  for (const [isoName, iso] of [['read_committed', READ_COMMITTED], ['read_uncommitted', READ_UNCOMMITTED]]) {
    const got = {}
    const next = {}
    for (const p of partitionIds) {
      got[p] = []
      next[p] = 0
    }
    const done = new Set()
    const deadline = Date.now() + args.timeoutMs
    for (const [nodeId, parts] of Object.entries(leaders)) {
      const broker = await cluster.findBroker({ nodeId })
      while (parts.some(p => !done.has(p))) {
        if (Date.now() > deadline) {
          throw new Error(`${isoName}: fetch timed out: next offsets ${JSON.stringify(next)}, done ${[...done]}`)
        }
        const pending = parts.filter(p => !done.has(p))
        const resp = await broker.fetch({
          replicaId: -1,
          isolationLevel: iso,
          maxWaitTime: 200,
          minBytes: 1,
          maxBytes: 4 << 20,
          topics: [{
            topic: args.topic,
            partitions: pending.map(p => ({ partition: p, fetchOffset: String(next[p]), maxBytes: 1 << 20 })),
          }],
        })
        for (const t of resp.responses) {
          for (const pd of t.partitions) {
            if (pd.errorCode !== 0) {
              throw new Error(`${isoName}: fetch ${t.topicName}[${pd.partition}] at ${next[pd.partition]}: error code ${pd.errorCode}`)
            }
            const batch = new Batch(args.topic, String(next[pd.partition]), pd)
            const data = batch.messagesWithinOffset.filter(m => !m.isControlRecord)
            filtered[isoName] += data.length - batch.messages.length
            for (const m of batch.messages) {
              const off = Number(m.offset)
              got[pd.partition].push([off, m.key === null ? null : m.key.toString(), m.value === null ? null : m.value.toString()])
              if (off >= last) done.add(pd.partition)
            }
            // The next fetch starts after everything fetched, control
            // records and filtered records included.
            for (const m of batch.messagesWithinOffset) {
              next[pd.partition] = Math.max(next[pd.partition], Number(m.offset) + 1)
            }
          }
        }
      }
    }
    let n = 0
    for (const p of partitionIds) {
      const want = []
      for (const [si, step] of args.plan.entries()) {
        if (!step.commit && iso === READ_COMMITTED) continue
        for (let i = 0; i < args.perPartition; i++) {
          want.push([offsetOf(si, i), keyOf(step.name, p, i), valueOf(args.prefix, step.name, p, i)])
        }
      }
      if (JSON.stringify(got[p]) !== JSON.stringify(want)) {
        problem(`${isoName}: partition ${p}: got ${JSON.stringify(got[p])}, want ${JSON.stringify(want)}`)
      }
      n += got[p].length
    }
    counts[isoName] = n
  }
  await cluster.disconnect()

  if (problems.length) throw new Error(problems.join('\n'))
  process.stdout.write(JSON.stringify({
    ok: true,
    delivered,
    readCommitted: counts.read_committed,
    readUncommitted: counts.read_uncommitted,
    abortedFiltered: filtered,
    versions,
  }) + '\n')
}

const timer = setTimeout(() => {
  process.stderr.write('kafkajs txn: overall timeout\n')
  process.exit(2)
}, 120000)
timer.unref()

main().then(
  () => process.exit(0),
  err => {
    process.stderr.write(`kafkajs txn FAILED: ${err && err.stack ? err.stack : err}\n`)
    process.exit(1)
  },
)
