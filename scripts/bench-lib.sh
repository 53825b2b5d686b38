# Shared helpers of scripts/bench-ab.sh and scripts/bench-ab3.sh (sourced).

# wait_port PORT: wait up to 20 s until 127.0.0.1:PORT accepts connections.
wait_port() {
	for _ in $(seq 200); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	return 1
}

# pin CPU: prints "taskset -c CPU" when PIN=1 and the machine has at least
# two CPUs, to put before a command (unquoted) so that the load generator
# and the broker do not take each other's core; prints nothing otherwise.
pin() {
	if [ "${PIN:-0}" = 1 ] && [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
		echo "taskset -c $1"
	fi
}

# field NAME JSON: the number of field NAME in sluice-bench's one-line JSON.
field() {
	sed -n "s/.*\"$1\":\([-0-9.e+]*\).*/\1/p" <<<"$2"
}

# rounds ROUNDS A B: runs `run A` and `run B` (run is the caller's function,
# printing "produce_rec/s consume_rec/s") ROUNDS times, alternating which
# goes first, and prints each pair and its B/A ratios.
rounds() {
	local n=$1 a=$2 b=$3 r pa ca pb cb
	printf '%-6s %-3s %14s %14s\n' round run produce_rec/s consume_rec/s
	for r in $(seq "$n"); do
		if [ $((r % 2)) -eq 1 ]; then
			read -r pa ca < <(run "$a"); read -r pb cb < <(run "$b")
		else
			read -r pb cb < <(run "$b"); read -r pa ca < <(run "$a")
		fi
		printf '%-6s %-3s %14s %14s\n' "$r" A "$pa" "$ca" "$r" B "$pb" "$cb"
		awk -v r="$r" -v pa="$pa" -v pb="$pb" -v ca="$ca" -v cb="$cb" 'BEGIN { c = (ca > 0) ? sprintf("%.2fx", cb / ca) : "n/a"; printf "round %s: B/A produce %.2fx, consume %s\n", r, pb / pa, c }'
	done
}
