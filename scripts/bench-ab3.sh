#!/usr/bin/env bash
# Interleaved A/B throughput of sluice on a 3-node cluster (RF 3 topics)
# with sluice-bench (docs/performance.md): each round starts a fresh
# 3-node cluster of A and of B (alternating which goes first), runs
# sluice-bench once against each and prints produce and consume throughput
# and the B/A ratio, and the CPU seconds (user+system) the three nodes
# used in all during the sluice-bench run (topic creation, warm-up and
# topic deletion included; the nodes' start left out).
#
#   scripts/bench-ab3.sh ROUNDS "A-BINARY A-BENCH-ARGS" "B-BINARY B-BENCH-ARGS"
#
# Example, 100 B acks=all RF 3, this tree against an older commit:
#   BENCH_ARGS="--acks all --records 300000" scripts/bench-ab3.sh 3 "/tmp/sluice-old" "/tmp/sluice-new"
#
# The RF 3 acks=all / RF 1 acks=1 ratio of one build (docs/performance.md,
# "Replication: RF 3 acks=all against RF 1 acks=1"; later flags win):
#   BENCH_ARGS="--records 1000000 --warmup 100000 --consume=false" \
#     scripts/bench-ab3.sh 6 "bin/sluice --acks 1 --replication-factor 1" "bin/sluice --acks all"
#
# PORT_BASE=N puts the nodes on ports N+1..N+13, or N+21..N+33 and so on
# when one is taken (default: random in 20000-39999).
set -euo pipefail
rounds=$1
a=$2
b=$3
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
(cd "$root" && go build -o "$tmp/sluice-bench" ./cmd/sluice-bench)
# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh"
run() { # "binary bench-args" -> "produce_rec/s consume_rec/s"
	local bin args base voters pids out d
	read -r bin args <<<"$1"
	# A port of the range may be taken (an outgoing connection's
	# ephemeral port): a node that cannot listen exits, and the cluster
	# starts again on the next ports.
	for start in 1 2 3 4 5; do
		if [ -n "${PORT_BASE:-}" ]; then
			base=$((PORT_BASE + (start - 1) * 20))
		else
			base=$((20000 + RANDOM % 20000))
		fi
		voters="1@127.0.0.1:$((base + 11)),2@127.0.0.1:$((base + 12)),3@127.0.0.1:$((base + 13))"
		d="$tmp/run-$RANDOM$RANDOM"
		pids=()
		for n in 1 2 3; do
			"$bin" serve --node-id "$n" --listen "127.0.0.1:$((base + n))" --controller-listen "127.0.0.1:$((base + 10 + n))" \
				--voters "$voters" --data-dir "$d/$n" >"$tmp/serve-$n.log" 2>&1 &
			pids+=($!)
		done
		for n in 1 2 3; do wait_port $((base + n)) || true; done
		sleep 1
		if kill -0 "${pids[@]}" 2>/dev/null; then
			break
		fi
		kill "${pids[@]}" 2>/dev/null || true
		wait "${pids[@]}" 2>/dev/null || true
	done
	# The nodes' CPU counts from here: their start is left out.
	local cpu0
	cpu0=$(nodes_cpu "${pids[@]}")
	# A listening broker may not have registered yet: creating an RF 3
	# topic then fails with INVALID_REPLICATION_FACTOR, as in Kafka, so
	# the run is retried, for up to about 20 s (a loaded machine).
	for try in $(seq 20); do
		# shellcheck disable=SC2086
		if out=$("$tmp/sluice-bench" --brokers "127.0.0.1:$((base + 1)),127.0.0.1:$((base + 2)),127.0.0.1:$((base + 3))" \
			--replication-factor 3 --json ${BENCH_ARGS:-} $args); then
			break
		fi
		[ "$try" -lt 20 ] && sleep 1
	done
	local cpu
	cpu=$(awk -v a="$cpu0" -v b="$(nodes_cpu "${pids[@]}")" 'BEGIN { printf "%.2f", b - a }')
	# Every node that is still up (a node that died must not leave the
	# others running).
	kill "${pids[@]}" 2>/dev/null || true
	wait "${pids[@]}" 2>/dev/null || true
	printf '%.0f %.0f %s\n' "$(field produceRecordsPerSec "$out")" "$(field consumeRecordsPerSec "$out")" "$cpu"
}
rounds "$rounds" "$a" "$b"
