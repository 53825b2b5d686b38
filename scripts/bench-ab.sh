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
set -euo pipefail
rounds=$1
a=$2
b=$3
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
(cd "$root" && go build -o "$tmp/sluice-bench" ./cmd/sluice-bench)
wait_port() {
	for _ in $(seq 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	return 1
}
field() { # name json -> the number of field name in sluice-bench's one-line JSON
	sed -n "s/.*\"$1\":\([-0-9.e+]*\).*/\1/p" <<<"$2"
}
run() { # "binary bench-args" -> "produce_rec/s consume_rec/s"
	local bin args port pid out
	read -r bin args <<<"$1"
	port=$((20000 + RANDOM % 20000))
	"$bin" serve --data-dir "$tmp/data-$RANDOM$RANDOM" --listen "127.0.0.1:$port" >"$tmp/serve.log" 2>&1 &
	pid=$!
	wait_port "$port"
	# shellcheck disable=SC2086
	out=$("$tmp/sluice-bench" --brokers "127.0.0.1:$port" --json ${BENCH_ARGS:-} $args)
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	printf '%.0f %.0f\n' "$(field produceRecordsPerSec "$out")" "$(field consumeRecordsPerSec "$out")"
}
printf '%-6s %-3s %14s %14s\n' round run produce_rec/s consume_rec/s
for r in $(seq "$rounds"); do
	if [ $((r % 2)) -eq 1 ]; then
		read -r pa ca < <(run "$a"); read -r pb cb < <(run "$b")
	else
		read -r pb cb < <(run "$b"); read -r pa ca < <(run "$a")
	fi
	printf '%-6s %-3s %14s %14s\n' "$r" A "$pa" "$ca" "$r" B "$pb" "$cb"
	awk -v r="$r" -v pa="$pa" -v pb="$pb" -v ca="$ca" -v cb="$cb" 'BEGIN { printf "round %s: B/A produce %.2fx, consume %.2fx\n", r, pb / pa, cb / ca }'
done
