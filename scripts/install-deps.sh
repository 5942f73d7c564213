#!/usr/bin/env bash
# Installs everything floodmark needs on a fresh Debian machine (idempotent).
# System packages: ZooKeeper (and Java), Chromium for report tests, debootstrap for the Docker
# base image, libfaketime, iproute2/iptables for network faults, valgrind for the simulator's
# instruction counts (bench/bench_sim.py --instructions). Python packages from pyproject.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(zookeeper libslf4j-java default-jre-headless chromium debootstrap faketime iproute2 iptables
              procps psmisc util-linux ca-certificates valgrind)
PYTHON=${PYTHON:-python3}

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "==> apt-get install ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

echo "==> pip install -e .[dev,spark]"
"$PYTHON" -m pip install -q --disable-pip-version-check -e ".[dev,spark]" 2>&1 | grep -v "Running pip as the 'root'" || true
"$PYTHON" -c "import floodmark, kazoo, pyspark, playwright, hypothesis, xdist" \
  || { echo "install-deps: python packages missing after install" >&2; exit 1; }
