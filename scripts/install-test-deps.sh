#!/usr/bin/env bash
# Installs what the compatibility tests (test/compat) and the console's
# screenshot test (test/console) need on a fresh Debian machine, as root:
# kcat (librdkafka's CLI), python3-confluent-kafka, node + npm, the pinned
# npm packages of test/compat/kafkajs, and chromium (headless, for
# test/console). Idempotent: work already done is skipped, so a re-run
# takes about a second.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export DEBIAN_FRONTEND=noninteractive

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		sudo_cmd=(sudo)
	else
		echo "install-test-deps: not root and no sudo; cannot apt-get install" >&2
	fi
fi

apt_updated=0
apt_install() {
	if [ "$apt_updated" -eq 0 ]; then
		echo "install-test-deps: apt-get update"
		"${sudo_cmd[@]}" apt-get update -qq
		apt_updated=1
	fi
	echo "install-test-deps: apt-get install -y $*"
	"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# kcat: Debian's package is named kcat (older releases: kafkacat).
# git and tar: test/upgrade builds an earlier commit's binary (git archive | tar -x).
for tool in git tar; do
	if command -v "$tool" >/dev/null 2>&1; then
		echo "install-test-deps: $tool present"
	else
		apt_install "$tool"
	fi
done

if command -v kcat >/dev/null 2>&1; then
	echo "install-test-deps: kcat present ($(command -v kcat))"
else
	apt_install kcat
fi

# python3-confluent-kafka: test/compat's TestTxnLibrdkafka drives
# librdkafka's transactional producer (kcat has none) through
# confluent-kafka-python with /usr/bin/python3, where Debian's package
# installs (a python3 earlier on PATH, e.g. pyenv's, may lack the module).
if /usr/bin/python3 -c 'import confluent_kafka' >/dev/null 2>&1; then
	echo "install-test-deps: python3-confluent-kafka present ($(/usr/bin/python3 -c 'import confluent_kafka as c; print(c.version()[0], "over librdkafka", c.libversion()[0])'))"
else
	apt_install python3-confluent-kafka
fi

# chromium: test/console renders the console in headless Chromium
# (--screenshot, --dump-dom); with CI=true a missing chromium fails it.
if command -v chromium >/dev/null 2>&1; then
	echo "install-test-deps: chromium present ($(command -v chromium))"
else
	apt_install chromium
fi

# node and npm: usually already on the machine; Debian's nodejs/npm otherwise.
missing=()
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ "${#missing[@]}" -gt 0 ]; then
	apt_install "${missing[@]}"
fi
echo "install-test-deps: node $(node --version), npm $(npm --version)"

# npm packages for the KafkaJS test, from the committed package-lock.json.
# --ignore-scripts: every package used works without its install script
# (lz4's optional native build is not needed; kafkajs-lz4 falls back to JS).
js="$root/test/compat/kafkajs"
stamp="$js/node_modules/.sluice-lock.sha256"
want="$(sha256sum "$js/package-lock.json" | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	echo "install-test-deps: test/compat/kafkajs/node_modules up to date"
else
	echo "install-test-deps: npm ci in test/compat/kafkajs"
	(cd "$js" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
	echo "$want" >"$stamp"
fi
echo "install-test-deps: done"
