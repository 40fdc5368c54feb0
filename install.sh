#!/usr/bin/env bash
# Install perfkit and everything it needs on Debian 12, into ./.venv.
#   As root: Debian packages first (compiler, libdpdk-dev for the DPDK extension,
#   iproute2, the peer tools the benchmarks compare against, and stress-ng for
#   .ci/run's contention stage).
#   Then: a virtual environment in .venv with
#   perfkit built from this folder and its extras (notebook, test).
set -euo pipefail
cd "$(dirname "$0")"

APT_PACKAGES="build-essential pkg-config python3-dev python3-venv python3-pip libdpdk-dev libssl-dev openssl iproute2 iputils-ping ethtool curl strace iperf3 qperf sockperf chromium nginx-light wrk stress-ng"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "install.sh: Debian packages: $APT_PACKAGES"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $APT_PACKAGES >/dev/null
else
    echo "install.sh: not root, Debian packages skipped (need: $APT_PACKAGES);" \
         "without libdpdk-dev the DPDK extension is not built"
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check '.[all]'
echo "install.sh: perfkit installed in .venv: $(.venv/bin/perfkit engines | tr -d '\n ' | head -c 300)"
