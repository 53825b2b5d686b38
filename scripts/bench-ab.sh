#!/usr/bin/env bash
# Interleaved A/B throughput of sluice with sluice-bench (docs/performance.md):
# each round starts a fresh single-node broker for A and for B (alternating
# which goes first), runs sluice-bench once against each and prints produce
# and consume throughput and the B/A ratio.
#
#   scripts/bench-ab.sh ROUNDS "A-BINARY A-BENCH-ARGS" "B-BINARY B-BENCH-ARGS"
#
# Example, this tree against the commit before a change, 100 B acks=1:
#   git worktree add /tmp/old OLD && (cd /tmp/old && go build -o /tmp/sluice-old ./cmd/sluice)
#   go build -o /tmp/sluice-new ./cmd/sluice
#   scripts/bench-ab.sh 3 "/tmp/sluice-old --partitions 3" "/tmp/sluice-new --partitions 3"
# or one binary with 3 against 1,000 partitions:
#   scripts/bench-ab.sh 3 "/tmp/sluice-new --partitions 3" "/tmp/sluice-new --partitions 1000"
# PIN=1 runs the broker on CPU 1 and sluice-bench on CPU 0 (taskset), so
# that the load generator's CPU does not set the broker's rate.
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
	local bin args port pid out
	read -r bin args <<<"$1"
	port=$((20000 + RANDOM % 20000))
	# shellcheck disable=SC2046
	$(pin 1) "$bin" serve --data-dir "$tmp/data-$RANDOM$RANDOM" --listen "127.0.0.1:$port" >"$tmp/serve.log" 2>&1 &
	pid=$!
	wait_port "$port"
	# shellcheck disable=SC2086
	# shellcheck disable=SC2046
	out=$($(pin 0) "$tmp/sluice-bench" --brokers "127.0.0.1:$port" --json ${BENCH_ARGS:-} $args)
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	printf '%.0f %.0f\n' "$(field produceRecordsPerSec "$out")" "$(field consumeRecordsPerSec "$out")"
}
rounds "$rounds" "$a" "$b"
