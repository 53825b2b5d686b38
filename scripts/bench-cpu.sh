#!/usr/bin/env bash
# Broker CPU seconds per million records produced and consumed back, for
# sluice and for franz-go's in-memory kfake broker, interleaved in one run
# (docs/performance.md). Each round starts a fresh broker, runs sluice-bench
# against it and reads the broker process's user+system CPU time from
# /proc. The figure to compare is the ratio in the same round.
#
#   scripts/bench-cpu.sh [rounds] [records] [size] [partitions]
#
# Defaults: 3 rounds, 1,000,000 records of 100 bytes, acks=1, 3 partitions.
set -euo pipefail
rounds=${1:-3}
records=${2:-1000000}
size=${3:-100}
partitions=${4:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
(cd "$root" && go build -o "$tmp/sluice" ./cmd/sluice && go build -o "$tmp/sluice-bench" ./cmd/sluice-bench)
(cd "$root/bench/kfake" && go build -o "$tmp/kfake-serve" .)

cpu() { # user+system seconds of pid
	awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); split($0, f, " "); printf "%.2f", (f[12] + f[13]) / hz }' "/proc/$1/stat"
}
wait_port() {
	for _ in $(seq 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	echo "port $1 not listening" >&2
	return 1
}
field() { # name json -> the number of field name in sluice-bench's one-line JSON
	sed -n "s/.*\"$1\":\([-0-9.e+]*\).*/\1/p" <<<"$2"
}
run() { # name -> prints "cpu_per_million produce_rec_per_s consume_rec_per_s"
	local name=$1 port=$2 pid
	case $name in
	sluice) "$tmp/sluice" serve --data-dir "$tmp/data-$RANDOM" --listen "127.0.0.1:$port" >"$tmp/$name.log" 2>&1 & ;;
	kfake) "$tmp/kfake-serve" --port "$port" >"$tmp/$name.log" 2>&1 & ;;
	esac
	pid=$!
	wait_port "$port"
	sleep 0.5
	local c0 c1 out
	c0=$(cpu "$pid")
	out=$("$tmp/sluice-bench" --brokers "127.0.0.1:$port" --records "$records" --size "$size" --acks 1 \
		--partitions "$partitions" --json)
	c1=$(cpu "$pid")
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	awk -v c0="$c0" -v c1="$c1" -v n="$records" -v p="$(field produceRecordsPerSec "$out")" -v q="$(field consumeRecordsPerSec "$out")" \
		'BEGIN { printf "%.2f %.0f %.0f\n", (c1 - c0) / (n / 1e6), p, q }'
}

printf '%-6s %-7s %12s %14s %14s\n' round broker cpu_s/Mrec produce_rec/s consume_rec/s
for r in $(seq "$rounds"); do
	order="sluice kfake"
	[ $((r % 2)) -eq 0 ] && order="kfake sluice"
	declare -A got=()
	for b in $order; do
		read -r c p q < <(run "$b" $((20000 + RANDOM % 20000)))
		got[$b]=$c
		printf '%-6s %-7s %12s %14s %14s\n' "$r" "$b" "$c" "$p" "$q"
	done
	awk -v r="$r" -v s="${got[sluice]}" -v k="${got[kfake]}" 'BEGIN { printf "round %s: sluice/kfake CPU per record = %.2fx\n", r, s / k }'
done
