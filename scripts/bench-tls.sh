#!/usr/bin/env bash
# Produce and consume throughput over TLS as a ratio to plaintext, in the
# same run (docs/performance.md): one single-node broker with a PLAINTEXT
# and an SSL listener (a CA and a server certificate made here with
# openssl), and sluice-bench against each listener in turn, alternating
# which goes first, for 100 B and 1 KiB records.
#
#   scripts/bench-tls.sh [ROUNDS] [SLUICE-BINARY]
set -euo pipefail
rounds=${1:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
bin=${2:-$tmp/sluice}
if [ -z "${2:-}" ]; then (cd "$root" && go build -o "$tmp/sluice" ./cmd/sluice); fi
(cd "$root" && go build -o "$tmp/sluice-bench" ./cmd/sluice-bench)

cd "$tmp"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=bench-ca" \
	-keyout ca.key -out ca.pem 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=broker" -keyout broker.key -out broker.csr 2>/dev/null
printf "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n" >broker.ext
openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile broker.ext -out broker.crt 2>/dev/null
cat broker.key broker.crt >broker.pem

plain=$((20000 + RANDOM % 20000))
ssl=$((plain + 1))
cat >server.properties <<PROPS
listeners=PLAINTEXT://127.0.0.1:$plain,SSL://127.0.0.1:$ssl
ssl.keystore.type=PEM
ssl.keystore.location=$tmp/broker.pem
PROPS
"$bin" serve --data-dir "$tmp/data" --config server.properties >serve.log 2>&1 &
for _ in $(seq 100); do
	if (exec 3<>"/dev/tcp/127.0.0.1/$ssl") 2>/dev/null; then break; fi
	sleep 0.1
done

field() { sed -n "s/.*\"$1\":\([-0-9.e+]*\).*/\1/p" <<<"$2"; }
run() { # size records extra-args -> "produce_rec/s consume_rec/s"
	local out
	# shellcheck disable=SC2086
	out=$("$tmp/sluice-bench" --json --size "$1" --records "$2" --warmup 10000 $3)
	printf '%.0f %.0f\n' "$(field produceRecordsPerSec "$out")" "$(field consumeRecordsPerSec "$out")"
}
for size in 100 1024; do
	records=500000
	[ "$size" -gt 100 ] && records=200000
	for r in $(seq "$rounds"); do
		if [ $((r % 2)) -eq 1 ]; then
			read -r pp pc < <(run "$size" "$records" "--brokers 127.0.0.1:$plain")
			read -r tp tc < <(run "$size" "$records" "--brokers 127.0.0.1:$ssl --tls-ca $tmp/ca.pem")
		else
			read -r tp tc < <(run "$size" "$records" "--brokers 127.0.0.1:$ssl --tls-ca $tmp/ca.pem")
			read -r pp pc < <(run "$size" "$records" "--brokers 127.0.0.1:$plain")
		fi
		awk -v s="$size" -v r="$r" -v pp="$pp" -v pc="$pc" -v tp="$tp" -v tc="$tc" 'BEGIN {
			printf "%5d B round %s: produce plain %.0f TLS %.0f rec/s (%.2fx), consume plain %.0f TLS %.0f rec/s (%.2fx)\n",
				s, r, pp, tp, tp / pp, pc, tc, tc / pc }'
	done
done
