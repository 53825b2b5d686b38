#!/usr/bin/env node
// One KafkaJS 2.2.4 consumer-group member for test/groups (driven by
// extmembers_test.go): joins --group, consumes --topic from the beginning
// with consumer.run (autocommit every 200 ms), and prints every value on
// its own line on stdout. SIGTERM/SIGINT disconnects cleanly (commits and
// leaves the group), then exits 0.
//
//   NODE_PATH=test/compat/kafkajs/node_modules \
//     node group.js --brokers 127.0.0.1:9092,... --group G --topic T [--client-id ID]
//
// It reuses test/compat/kafkajs's installed modules (kafkajs,
// kafkajs-snappy for the snappy batches franz-go produces by default)
// through NODE_PATH instead of a package.json of its own.
'use strict'

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'

const { Kafka, CompressionTypes, CompressionCodecs, logLevel } = require('kafkajs')
CompressionCodecs[CompressionTypes.Snappy] = require('kafkajs-snappy')

function parseArgs(argv) {
  const a = { clientId: 'kafkajs-group' }
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i]
    const v = () => {
      if (i + 1 >= argv.length) throw new Error(`missing value for ${k}`)
      return argv[++i]
    }
    switch (k) {
      case '--brokers': a.brokers = v().split(','); break
      case '--group': a.group = v(); break
      case '--topic': a.topic = v(); break
      case '--client-id': a.clientId = v(); break
      default: throw new Error(`unknown argument ${k}`)
    }
  }
  for (const k of ['brokers', 'group', 'topic']) {
    if (a[k] === undefined) throw new Error(`--${k} is required`)
  }
  return a
}

async function main() {
  const a = parseArgs(process.argv.slice(2))
  const kafka = new Kafka({
    clientId: a.clientId,
    brokers: a.brokers,
    logLevel: logLevel.WARN,
    retry: { retries: 20, initialRetryTime: 100, maxRetryTime: 2000 },
  })
  const consumer = kafka.consumer({
    groupId: a.group,
    sessionTimeout: 6000,
    heartbeatInterval: 500,
    rebalanceTimeout: 20000,
    maxWaitTimeInMs: 200,
    retry: { retries: 20, initialRetryTime: 100, maxRetryTime: 2000 },
  })
  let stopping = false
  const stop = async () => {
    if (stopping) return
    stopping = true
    try {
      await consumer.disconnect() // commits resolved offsets, leaves the group
    } catch (e) {
      process.stderr.write(`disconnect: ${e.stack || e}\n`)
      process.exit(1)
    }
    process.exit(0)
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
  consumer.on(consumer.events.CRASH, e => {
    process.stderr.write(`consumer crashed: ${e.payload.error && e.payload.error.stack}\n`)
  })
  consumer.on(consumer.events.GROUP_JOIN, e => {
    process.stderr.write(`joined generation ${e.payload.groupProtocol} ${JSON.stringify(e.payload.memberAssignment)}\n`)
  })
  await consumer.connect()
  await consumer.subscribe({ topics: [a.topic], fromBeginning: true })
  await consumer.run({
    autoCommitInterval: 200,
    eachMessage: async ({ message }) => {
      process.stdout.write(message.value.toString() + '\n')
    },
  })
}

main().catch(e => {
  process.stderr.write(`${e.stack || e}\n`)
  process.exit(1)
})
