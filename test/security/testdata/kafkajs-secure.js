#!/usr/bin/env node
// KafkaJS 2.2.4 over SASL_SSL (SCRAM-SHA-512) or SSL with a client
// certificate (mTLS): produce N records with acks=-1 to an existing
// single-partition topic, then read partition 0 back with KafkaJS's own
// Fetch (as test/compat/kafkajs/compat.js does) and check the values.
// Run with NODE_PATH=test/compat/kafkajs/node_modules.
//
//   node kafkajs-secure.js --broker H:P --topic T --count N --prefix P --ca ca.pem
//        (--user U --password W | --cert c.pem --key k.pem) [--expect-auth-failure]
//
// Value i is `${P}-${i}`. Prints one JSON line on success; exits 1 with the
// reason on stderr otherwise. With --expect-auth-failure it succeeds only if
// connecting fails with an authentication error.
'use strict'

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'
const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

function parseArgs(argv) {
  const a = { expectAuthFailure: false }
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i]
    const v = () => argv[++i]
    switch (k) {
      case '--broker': a.broker = v(); break
      case '--topic': a.topic = v(); break
      case '--count': a.count = parseInt(v(), 10); break
      case '--prefix': a.prefix = v(); break
      case '--ca': a.ca = v(); break
      case '--cert': a.cert = v(); break
      case '--key': a.key = v(); break
      case '--user': a.user = v(); break
      case '--password': a.password = v(); break
      case '--expect-auth-failure': a.expectAuthFailure = true; break
      default: throw new Error(`unknown argument ${k}`)
    }
  }
  return a
}

async function main() {
  const args = parseArgs(process.argv.slice(2))
  const ssl = { ca: [fs.readFileSync(args.ca)] }
  if (args.cert) {
    ssl.cert = fs.readFileSync(args.cert)
    ssl.key = fs.readFileSync(args.key)
  }
  const kafka = new Kafka({
    clientId: 'sluice-security-kafkajs',
    brokers: [args.broker],
    ssl,
    sasl: args.user ? { mechanism: 'scram-sha-512', username: args.user, password: args.password } : undefined,
    connectionTimeout: 5000,
    requestTimeout: 15000,
    retry: { retries: args.expectAuthFailure ? 0 : 5, initialRetryTime: 100, maxRetryTime: 2000 },
    logLevel: args.expectAuthFailure ? logLevel.NOTHING : logLevel.WARN,
  })
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  if (args.expectAuthFailure) {
    try {
      await producer.connect()
      await producer.send({ topic: args.topic, acks: -1, messages: [{ value: 'denied' }] })
    } catch (err) {
      const s = `${err.name}: ${err.message}`
      if (/SASL|[Aa]uthentication/.test(s)) {
        process.stdout.write(JSON.stringify({ ok: true, denied: s }) + '\n')
        return
      }
      throw new Error(`expected an authentication error, got ${s}`)
    }
    throw new Error('produce with a wrong password succeeded')
  }
  await producer.connect()
  const messages = []
  for (let i = 0; i < args.count; i++) messages.push({ value: `${args.prefix}-${i}` })
  const res = await producer.send({ topic: args.topic, acks: -1, timeout: 15000, messages })
  for (const r of res) {
    if (r.errorCode !== 0) throw new Error(`produce: partition ${r.partition} error code ${r.errorCode}`)
  }
  await producer.disconnect()

  const createCluster = Object.getOwnPropertySymbols(kafka)
    .find(s => s.description === 'private:Kafka:createCluster')
  if (!createCluster) throw new Error('kafkajs internals changed: no createCluster symbol')
  const cluster = kafka[createCluster]({ allowAutoTopicCreation: false, isolationLevel: 1 })
  await cluster.connect()
  await cluster.addTargetTopic(args.topic)
  const leaders = cluster.findLeaderForPartitions(args.topic, [0])
  const nodeId = Object.keys(leaders)[0]
  const broker = await cluster.findBroker({ nodeId })
  const got = []
  const deadline = Date.now() + 30000
  while (got.length < args.count) {
    if (Date.now() > deadline) throw new Error(`fetch timed out after ${got.length} of ${args.count} records`)
    const resp = await broker.fetch({
      replicaId: -1, isolationLevel: 1, maxWaitTime: 200, minBytes: 1, maxBytes: 4 << 20,
      topics: [{ topic: args.topic, partitions: [{ partition: 0, fetchOffset: String(got.length), maxBytes: 1 << 20 }] }],
    })
    for (const t of resp.responses) {
      for (const pd of t.partitions) {
        if (pd.errorCode !== 0) throw new Error(`fetch ${t.topicName}[0] at ${got.length}: error code ${pd.errorCode}`)
        for (const m of pd.messages) {
          if (Number(m.offset) < got.length) continue
          got.push(m.value === null ? null : m.value.toString())
        }
      }
    }
  }
  await cluster.disconnect()
  for (let i = 0; i < args.count; i++) {
    if (got[i] !== `${args.prefix}-${i}`) throw new Error(`record ${i}: ${JSON.stringify(got[i])}, want ${args.prefix}-${i}`)
  }
  process.stdout.write(JSON.stringify({ ok: true, produced: args.count, consumed: got.length }) + '\n')
}

const timer = setTimeout(() => {
  process.stderr.write('kafkajs-secure: overall timeout\n')
  process.exit(2)
}, 60000)
timer.unref()

main().then(
  () => process.exit(0),
  err => {
    process.stderr.write(`kafkajs-secure FAILED: ${err && err.stack ? err.stack : err}\n`)
    process.exit(1)
  },
)
