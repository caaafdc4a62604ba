#!/usr/bin/env bash
# test_prom_rules — the alert rules shipped in scripts/prometheus/ (issue
# 55): promtool checks them and runs their unit tests
# (memtally-rules.test.yml: series in, alerts out: a rank growing while
# its peers do not, every rank growing alike, an ended process, another
# job, device growth, a GPU and a cgroup near their limits).  promtool is
# Debian's `prometheus` package (scripts/setup-deps.sh).
set -u
cd "$(dirname "$0")/../../scripts/prometheus"
command -v promtool >/dev/null || { echo "FAIL: no promtool (apt-get install prometheus: scripts/setup-deps.sh)"; exit 1; }
fail=0
if promtool check rules memtally-rules.yml; then
	echo "ok   promtool check rules"
else
	echo "FAIL promtool check rules"; fail=1
fi
if promtool test rules memtally-rules.test.yml; then
	echo "ok   promtool test rules"
else
	echo "FAIL promtool test rules"; fail=1
fi
exit $fail
