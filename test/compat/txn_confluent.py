#!/usr/bin/env python3
"""librdkafka's transactional producer (through confluent-kafka-python)
against a sluice cluster, driven by test/compat/txn_librdkafka_test.go.

    python3 txn_confluent.py --brokers H:P,H:P --topic T --txn-id ID \
        --prefix P --plan c1:commit,a1:abort,c2:commit --group G \
        [--partitions 3] [--per-partition 10] [--debug eos,protocol]

Runs the plan with one Producer: init_transactions, then per transaction
begin_transaction, produce (record i of transaction S on partition p: key
"S-p<p>-<iii>", value "P-S-p<p>-<iii>", to partitions 0.. in order),
flush, send_offsets_to_transaction (transaction number si commits offset
100*(si+1)+si for partition si of the topic in group G, with the group
metadata of a Consumer of G that has not joined it), commit_transaction or
abort_transaction. Every delivery report must come back without error at
the offset the record must have (each transaction's records follow the
previous transaction's marker). Then a
confluent Consumer (assign, no group) reads the topic back with
isolation.level read_committed and read_uncommitted and checks that it
sees exactly the committed records (and the aborted ones), each once, at
their offsets.

Prints one JSON line with a summary on success; exits 1 with the problems
on stderr on failure.
"""

import argparse
import json
import sys
import time

import confluent_kafka
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


def parse_args():
    a = argparse.ArgumentParser()
    a.add_argument("--brokers", required=True)
    a.add_argument("--topic", required=True)
    a.add_argument("--txn-id", required=True)
    a.add_argument("--prefix", required=True)
    a.add_argument("--plan", required=True)
    a.add_argument("--group", required=True)
    a.add_argument("--partitions", type=int, default=3)
    a.add_argument("--per-partition", type=int, default=10)
    a.add_argument("--debug", default="")
    a.add_argument("--timeout", type=float, default=30.0)
    args = a.parse_args()
    plan = []
    for step in args.plan.split(","):
        name, _, verb = step.partition(":")
        if verb not in ("commit", "abort"):
            a.error(f"bad plan step {step!r}")
        plan.append((name, verb == "commit"))
    args.plan = plan
    return args


def key_of(step, p, i):
    return f"{step}-p{p}-{i:03d}"


def value_of(prefix, step, p, i):
    return f"{prefix}-{step}-p{p}-{i:03d}"


def offset_of(args, si, i):
    return si * (args.per_partition + 1) + i


def group_offset(si):
    return 100 * (si + 1) + si


def log(msg):
    print(f"txn_confluent: {msg}", file=sys.stderr, flush=True)


def common_conf(args):
    conf = {
        "bootstrap.servers": args.brokers,
        "client.id": "sluice-compat-confluent-txn",
        "socket.timeout.ms": 10000,
    }
    if args.debug:
        conf["debug"] = args.debug
    return conf


def produce(args, problems):
    conf = common_conf(args)
    conf.update({
        "transactional.id": args.txn_id,
        # Implied by transactional.id; set as the other clients do.
        "enable.idempotence": True,
        "acks": "all",
        "max.in.flight.requests.per.connection": 1,
        "linger.ms": 5,
        "transaction.timeout.ms": 60000,
    })
    p = Producer(conf)
    t = args.timeout
    p.init_transactions(t)
    gconf = common_conf(args)
    gconf.update({"group.id": args.group, "enable.auto.commit": False})
    group_consumer = Consumer(gconf)
    group_metadata = group_consumer.consumer_group_metadata()
    delivered = 0
    for si, (step, commit) in enumerate(args.plan):
        p.begin_transaction()
        reports = []

        def on_delivery(err, m, step=step):
            reports.append((step, err, m))

        for part in range(args.partitions):
            for i in range(args.per_partition):
                p.produce(args.topic, value=value_of(args.prefix, step, part, i),
                          key=key_of(step, part, i), partition=part, on_delivery=on_delivery)
                p.poll(0)
        left = p.flush(t)
        if left:
            problems.append(f"transaction {step}: {left} records not delivered within {t}s")
        want = args.partitions * args.per_partition
        if len(reports) != want:
            problems.append(f"transaction {step}: {len(reports)} delivery reports, want {want}")
        for _, err, m in reports:
            if err is not None:
                problems.append(f"transaction {step}: delivery of {m.value()!r} failed: {err}")
                continue
            v = m.value().decode()
            part = m.partition()
            i = int(v.rsplit("-", 1)[1])
            if v != value_of(args.prefix, step, part, i) or m.offset() != offset_of(args, si, i):
                problems.append(f"transaction {step}: {v!r} delivered to partition {part} offset {m.offset()}, "
                                f"want offset {offset_of(args, si, i)}")
        delivered += len(reports)
        offsets = [TopicPartition(args.topic, si % args.partitions, group_offset(si))]
        p.send_offsets_to_transaction(offsets, group_metadata, t)
        if commit:
            p.commit_transaction(t)
        else:
            p.abort_transaction(t)
        log(f"transaction {step}: {len(reports)} records, {'committed' if commit else 'aborted'}")
    group_consumer.close()
    return delivered


def consume(args, isolation, problems):
    """Reads every partition from the start until the record before each
    partition's final marker, and checks what the isolation level shows."""
    conf = common_conf(args)
    conf.update({
        "group.id": f"{args.txn_id}-check-{isolation}",  # required; assign() joins no group
        "enable.auto.commit": False,
        "isolation.level": isolation,
        "enable.partition.eof": False,
        "fetch.wait.max.ms": 100,
    })
    c = Consumer(conf)
    c.assign([TopicPartition(args.topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(args.partitions)])
    last = offset_of(args, len(args.plan) - 1, args.per_partition - 1)
    got = {p: [] for p in range(args.partitions)}
    done = set()
    deadline = time.monotonic() + args.timeout
    while len(done) < args.partitions:
        if time.monotonic() > deadline:
            problems.append(f"{isolation}: partitions done {sorted(done)} before the timeout, "
                            f"records so far {[len(v) for v in got.values()]}")
            break
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            problems.append(f"{isolation}: consume error {m.error()}")
            break
        got[m.partition()].append((m.offset(), m.key().decode(), m.value().decode()))
        if m.offset() >= last:
            done.add(m.partition())
    c.close()
    read_committed = isolation == "read_committed"
    n = 0
    for p in range(args.partitions):
        want = []
        for si, (step, commit) in enumerate(args.plan):
            if commit or not read_committed:
                want += [(offset_of(args, si, i), key_of(step, p, i), value_of(args.prefix, step, p, i))
                         for i in range(args.per_partition)]
        if got[p] != want:
            problems.append(f"{isolation}: partition {p}: got {got[p]}, want {want}")
        n += len(got[p])
    return n


def main():
    args = parse_args()
    problems = []
    start = time.monotonic()
    try:
        delivered = produce(args, problems)
        produced_s = time.monotonic() - start
        committed = consume(args, "read_committed", problems)
        uncommitted = consume(args, "read_uncommitted", problems)
    except KafkaException as e:
        err = e.args[0]
        log(f"FAILED: {err.name()} (code {err.code()}): {err.str()} "
            f"retriable={err.retriable()} fatal={err.fatal()} txn_requires_abort={err.txn_requires_abort()}")
        return 1
    if problems:
        for pr in problems[:20]:
            log(f"PROBLEM: {pr}")
        return 1
    print(json.dumps({
        "ok": True,
        "version": confluent_kafka.version()[0],
        "librdkafka": confluent_kafka.libversion()[0],
        "delivered": delivered,
        "read_committed": committed,
        "read_uncommitted": uncommitted,
        "produce_seconds": round(produced_s, 3),
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
