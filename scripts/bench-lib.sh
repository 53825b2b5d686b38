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

# nodes_cpu PID...: the CPU seconds (user+system) the processes have used
# so far, in all (from /proc/PID/stat).
nodes_cpu() {
	local p s ticks=0 st
	for p in "$@"; do
		s=$(cat "/proc/$p/stat" 2>/dev/null) || continue
		read -r -a st <<<"${s##*) }" # the fields after the command name
		ticks=$((ticks + st[11] + st[12]))
	done
	awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz }'
}

# rounds ROUNDS A B: runs `run A` and `run B` (run is the caller's function,
# printing "produce_rec/s consume_rec/s [broker_cpu_s]") ROUNDS times,
# alternating which goes first, and prints each pair and its B/A ratios.
rounds() {
	local n=$1 a=$2 b=$3 r pa ca xa pb cb xb
	printf '%-6s %-3s %14s %14s %14s\n' round run produce_rec/s consume_rec/s broker_cpu_s
	for r in $(seq "$n"); do
		if [ $((r % 2)) -eq 1 ]; then
			read -r pa ca xa < <(run "$a"); read -r pb cb xb < <(run "$b")
		else
			read -r pb cb xb < <(run "$b"); read -r pa ca xa < <(run "$a")
		fi
		printf '%-6s %-3s %14s %14s %14s\n' "$r" A "$pa" "$ca" "${xa:--}" "$r" B "$pb" "$cb" "${xb:--}"
		awk -v r="$r" -v pa="$pa" -v pb="$pb" -v ca="$ca" -v cb="$cb" -v xa="$xa" -v xb="$xb" 'BEGIN {
			c = (ca > 0) ? sprintf("%.2fx", cb / ca) : "n/a"
			x = (xa > 0 && xb != "") ? sprintf(", broker CPU %.2fx", xb / xa) : ""
			printf "round %s: B/A produce %.2fx, consume %s%s\n", r, pb / pa, c, x
		}'
	done
}
