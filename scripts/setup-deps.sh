#!/usr/bin/env bash
# setup-deps.sh — install the Debian packages the build and tests need,
# only those missing (idempotent; a no-op on a machine that has them).
# MEMTALLY_DEPS_EXTRA adds packages (e.g. for `make bench`).
set -eu
need=(gcc make binutils libc6-dev libunwind-dev libdw-dev libelf-dev libprotobuf-c-dev zlib1g-dev libzstd-dev zstd
	python3 python3-venv python3-pip python3-pytest procps bc golang-go tmux sqlite3
	chromium python3-torch slurm-wlm munge
	openmpi-bin libopenmpi-dev libjemalloc2 heaptrack google-perftools valgrind nodejs
	prometheus prometheus-node-exporter)
need+=(${MEMTALLY_DEPS_EXTRA:-})
missing=()
for p in "${need[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "setup-deps: installing ${missing[*]}"
SUDO=; [ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
