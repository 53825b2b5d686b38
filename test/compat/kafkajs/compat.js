#!/usr/bin/env node
// KafkaJS 2.2.4 against a sluice broker: create a topic (admin), produce
// N records with a codec, then read every partition back with KafkaJS's own
// Fetch request (its consumer needs consumer groups, which the broker does
// not serve yet, so this drives the client's cluster/broker layer directly)
// and check values, keys, headers and contiguous offsets.
//
//   node compat.js --broker 127.0.0.1:9092 --topic T --codec gzip \
//        --count 2000 --prefix P [--partitions 3] [--idempotent]
//
// Record i: value `${P}-value-${i padded to 7}`, key `key-${i padded}`,
// headers idx=i, src=P (the Go side checks the same format).
// Prints one JSON line with a summary on success; exits 1 with the reason
// on stderr on failure.
'use strict'

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'

const { Kafka, CompressionTypes, CompressionCodecs, logLevel } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')
const lz4 = require('lz4js')
const zstd = require('@mongodb-js/zstd')
const { requests } = require('kafkajs/src/protocol/requests')

const USED_APIS = { Produce: 0, Fetch: 1, ListOffsets: 2, Metadata: 3, CreateTopics: 19, InitProducerId: 22, ApiVersions: 18 }

// Codec plugins. Snappy is the usual plugin, kafkajs-snappy (pure JS).
// The usual LZ4 plugin, kafkajs-lz4, depends on the `lz4` package, whose
// tarball ships macOS binaries and needs a node-gyp build on Linux; the
// usual ZSTD plugin, @kafkajs/zstd, needs a native build (cppzst) that
// fails on current Node. So LZ4 and ZSTD are small codecs over lz4js (pure
// JS, LZ4 frame format as Kafka uses it) and @mongodb-js/zstd (prebuilt
// napi binary from npm), with the codec interface KafkaJS documents.
CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
CompressionCodecs[CompressionTypes.LZ4] = () => ({
  compress: async encoder => Buffer.from(lz4.compress(encoder.buffer)),
  decompress: async buffer => Buffer.from(lz4.decompress(buffer)),
})
CompressionCodecs[CompressionTypes.ZSTD] = () => ({
  compress: async encoder => zstd.compress(encoder.buffer, 3),
  decompress: async buffer => zstd.decompress(buffer),
})

const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
}

function parseArgs(argv) {
  const a = { partitions: 3, idempotent: false, timeoutMs: 60000 }
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i]
    const v = () => {
      if (i + 1 >= argv.length) throw new Error(`missing value for ${k}`)
      return argv[++i]
    }
    switch (k) {
      case '--broker': a.broker = v(); break
      case '--topic': a.topic = v(); break
      case '--codec': a.codec = v(); break
      case '--count': a.count = parseInt(v(), 10); break
      case '--prefix': a.prefix = v(); break
      case '--partitions': a.partitions = parseInt(v(), 10); break
      case '--idempotent': a.idempotent = true; break
      case '--timeout-ms': a.timeoutMs = parseInt(v(), 10); break
      default: throw new Error(`unknown argument ${k}`)
    }
  }
  for (const k of ['broker', 'topic', 'codec', 'count', 'prefix']) {
    if (a[k] === undefined || Number.isNaN(a[k])) throw new Error(`--${k} is required`)
  }
  if (!(a.codec in CODECS)) throw new Error(`unknown codec ${a.codec}`)
  return a
}

const pad = i => String(i).padStart(7, '0')
const valueOf = (p, i) => `${p}-value-${pad(i)}`
const keyOf = i => `key-${pad(i)}`

async function main() {
  const args = parseArgs(process.argv.slice(2))
  const problems = []
  const problem = msg => {
    problems.push(msg)
    if (problems.length >= 20) throw new Error(`too many problems:\n${problems.join('\n')}`)
  }

  const kafka = new Kafka({
    clientId: 'sluice-compat-kafkajs',
    brokers: [args.broker],
    connectionTimeout: 5000,
    requestTimeout: 15000,
    retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 2000 },
    logLevel: logLevel.WARN,
  })

  // Admin: CreateTopics, Metadata.
  const admin = kafka.admin()
  await admin.connect()
  const created = await admin.createTopics({
    topics: [{ topic: args.topic, numPartitions: args.partitions, replicationFactor: 1 }],
    waitForLeaders: true,
    timeout: 10000,
  })
  if (!created) throw new Error(`createTopics(${args.topic}) returned false (topic already existed?)`)
  const md = await admin.fetchTopicMetadata({ topics: [args.topic] })
  const parts = md.topics[0].partitions
  if (parts.length !== args.partitions) {
    throw new Error(`metadata lists ${parts.length} partitions, want ${args.partitions}`)
  }

  // Produce.
  const producer = kafka.producer({
    idempotent: args.idempotent,
    maxInFlightRequests: args.idempotent ? 1 : undefined,
    allowAutoTopicCreation: false,
  })
  await producer.connect()
  const acked = {} // partition -> records acked
  const chunk = 500
  for (let lo = 0; lo < args.count; lo += chunk) {
    const messages = []
    for (let i = lo; i < Math.min(lo + chunk, args.count); i++) {
      messages.push({
        key: keyOf(i),
        value: valueOf(args.prefix, i),
        headers: { idx: String(i), src: args.prefix },
      })
    }
    const res = await producer.send({
      topic: args.topic,
      acks: -1,
      timeout: 15000,
      compression: CODECS[args.codec],
      messages,
    })
    for (const r of res) {
      if (r.errorCode !== 0) problem(`produce: partition ${r.partition} error code ${r.errorCode}`)
    }
  }
  await producer.disconnect()

  // High watermarks via ListOffsets (admin, no group).
  const offsets = await admin.fetchTopicOffsets(args.topic)
  const hw = {}
  let total = 0
  for (const o of offsets) {
    hw[o.partition] = Number(o.high)
    total += Number(o.high)
    if (Number(o.low) !== 0) problem(`partition ${o.partition}: log start offset ${o.low}, want 0`)
  }
  if (total !== args.count) problem(`high watermarks ${JSON.stringify(hw)} add up to ${total}, want ${args.count}`)

  // Read back with KafkaJS's Fetch, through the same cluster object its
  // consumer would use.
  const createCluster = Object.getOwnPropertySymbols(kafka)
    .find(s => s.description === 'private:Kafka:createCluster')
  if (!createCluster) throw new Error('kafkajs internals changed: no createCluster symbol')
  const cluster = kafka[createCluster]({ allowAutoTopicCreation: false, isolationLevel: 1 })
  await cluster.connect()
  await cluster.addTargetTopic(args.topic)
  const leaders = cluster.findLeaderForPartitions(args.topic, parts.map(p => p.partitionId))

  const seen = new Array(args.count).fill(0)
  const next = {}
  for (const p of parts) next[p.partitionId] = 0
  let consumed = 0
  let fetches = 0
  const versions = {}
  const deadline = Date.now() + args.timeoutMs
  for (const [nodeId, partitionIds] of Object.entries(leaders)) {
    const broker = await cluster.findBroker({ nodeId })
    // The version KafkaJS uses for each API: min(its newest, broker's max).
    for (const [name, key] of Object.entries(USED_APIS)) {
      const b = broker.versions[key]
      const mine = Math.max(...requests[name].versions.map(Number))
      versions[name] = b ? Math.min(mine, b.maxVersion) : 'not advertised'
    }
    for (;;) {
      const pending = partitionIds.filter(p => next[p] < hw[p])
      if (pending.length === 0) break
      if (Date.now() > deadline) {
        throw new Error(`fetch timed out: next offsets ${JSON.stringify(next)}, high watermarks ${JSON.stringify(hw)}`)
      }
      fetches++
      const resp = await broker.fetch({
        replicaId: -1,
        isolationLevel: 1,
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
            throw new Error(`fetch ${t.topicName}[${pd.partition}] at ${next[pd.partition]}: error code ${pd.errorCode}`)
          }
          if (Number(pd.highWatermark) !== hw[pd.partition]) {
            problem(`fetch ${pd.partition}: high watermark ${pd.highWatermark}, ListOffsets said ${hw[pd.partition]}`)
          }
          for (const m of pd.messages) {
            const off = Number(m.offset)
            // A compressed batch may start before the fetch offset; Kafka
            // clients skip those records.
            if (off < next[pd.partition]) continue
            if (off !== next[pd.partition]) {
              problem(`partition ${pd.partition}: offset ${off} where ${next[pd.partition]} was expected`)
            }
            next[pd.partition] = off + 1
            consumed++
            const v = m.value === null ? null : m.value.toString()
            const prefix = `${args.prefix}-value-`
            const i = v !== null && v.startsWith(prefix) ? parseInt(v.slice(prefix.length), 10) : NaN
            if (!(i >= 0 && i < args.count) || v !== valueOf(args.prefix, i)) {
              problem(`p${pd.partition}@${off}: unexpected value ${JSON.stringify(v)}`)
              continue
            }
            seen[i]++
            const k = m.key === null ? null : m.key.toString()
            if (k !== keyOf(i)) problem(`p${pd.partition}@${off}: key ${JSON.stringify(k)}, want ${keyOf(i)}`)
            const h = m.headers || {}
            const hk = Object.keys(h)
            const hidx = h.idx === undefined ? undefined : h.idx.toString()
            const hsrc = h.src === undefined ? undefined : h.src.toString()
            if (hk.length !== 2 || hidx !== String(i) || hsrc !== args.prefix) {
              problem(`p${pd.partition}@${off}: headers ${JSON.stringify(Object.fromEntries(hk.map(x => [x, String(h[x])])))}, want idx=${i} src=${args.prefix}`)
            }
          }
        }
      }
    }
  }
  await cluster.disconnect()
  await admin.disconnect()

  const missing = seen.reduce((n, c) => n + (c === 0 ? 1 : 0), 0)
  const dups = seen.reduce((n, c) => n + (c > 1 ? 1 : 0), 0)
  if (missing) problem(`${missing} records never fetched (first: ${seen.indexOf(0)})`)
  if (dups) problem(`${dups} records fetched more than once`)
  if (problems.length) throw new Error(problems.join('\n'))
  process.stdout.write(JSON.stringify({
    ok: true, produced: args.count, consumed, fetches, highWatermarks: hw, versions,
  }) + '\n')
}

const timer = setTimeout(() => {
  process.stderr.write('kafkajs compat: overall timeout\n')
  process.exit(2)
}, 120000)
timer.unref()

main().then(
  () => process.exit(0),
  err => {
    process.stderr.write(`kafkajs compat FAILED: ${err && err.stack ? err.stack : err}\n`)
    process.exit(1)
  },
)
