#!/usr/bin/env bash
# Installs every build and test dependency of ztune from Debian packages.
# Idempotent: when everything is present it prints nothing and exits 0.
set -euo pipefail
PKGS=(build-essential cmake ninja-build ccache pkg-config git
      libeigen3-dev libboost-graph-dev nlohmann-json3-dev libsqlite3-dev sqlite3
      catch2 qt6-base-dev qt6-charts-dev libqt6opengl6-dev libxkbcommon-dev
      libopenmpi-dev openmpi-bin libcli11-dev xvfb xauth python3-numpy bible-kjv
      clang libclang-rt-14-dev)  # clang and its libFuzzer/ASan/UBSan runtimes: the fuzz preset
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-deps: installing ${missing[*]}" >&2
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
