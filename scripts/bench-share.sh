#!/usr/bin/env bash
# Share group against classic group consume throughput on one 3-node
# cluster (docs/performance.md, "Share groups against classic groups"):
# starts the cluster once, then each round runs `sluice-bench --share` on a
# new 3-partition RF 3 topic: produce, read every record with a classic
# group of 3 members, then with a share group of 3 members acknowledging
# each record (accept), and print both rates and the share/classic ratio.
#
#   scripts/bench-share.sh [ROUNDS] [BINARY]
#
# BENCH_ARGS are further sluice-bench flags (default: --records 300000
# --acks all); PORT_BASE=N puts the nodes on ports N+1..N+3 (Kafka) and
# N+11..N+13 (controller) (default: random in 20000-39999); SERVE_CONFIG
# is a properties file every node starts with (serve --config); MEMBERS is
# the members of each group (default 3).
set -euo pipefail
rounds=${1:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
bin=${2:-}
if [ -z "$bin" ]; then
	(cd "$root" && go build -o "$tmp/sluice" ./cmd/sluice)
	bin=$tmp/sluice
fi
(cd "$root" && go build -o "$tmp/sluice-bench" ./cmd/sluice-bench)
# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh"
base=${PORT_BASE:-$((20000 + RANDOM % 20000))}
voters="1@127.0.0.1:$((base + 11)),2@127.0.0.1:$((base + 12)),3@127.0.0.1:$((base + 13))"
pids=()
for n in 1 2 3; do
	"$bin" serve --node-id "$n" --listen "127.0.0.1:$((base + n))" --controller-listen "127.0.0.1:$((base + 10 + n))" \
		--voters "$voters" --data-dir "$tmp/data/$n" ${SERVE_CONFIG:+--config "$SERVE_CONFIG"} >"$tmp/serve-$n.log" 2>&1 &
	pids+=($!)
done
for n in 1 2 3; do wait_port $((base + n)); done
brokers="127.0.0.1:$((base + 1)),127.0.0.1:$((base + 2)),127.0.0.1:$((base + 3))"
for r in $(seq "$rounds"); do
	# A broker that has not registered yet makes the RF 3 topic fail
	# (INVALID_REPLICATION_FACTOR, as in Kafka): retry.
	for try in 1 2 3 4 5; do
		# shellcheck disable=SC2086
		if out=$("$tmp/sluice-bench" --brokers "$brokers" --partitions 3 --replication-factor 3 \
			${BENCH_ARGS:---records 300000 --acks all} --share --group-members "${MEMBERS:-3}"); then
			break
		fi
		[ "$try" -lt 5 ] && sleep 2
	done
	echo "round $r:"
	echo "$out"
done
kill "${pids[@]}" 2>/dev/null || true
wait "${pids[@]}" 2>/dev/null || true
