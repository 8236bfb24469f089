#!/usr/bin/env bash
# Set up a fresh machine and build mkb: install the Debian packages in .ci/packages (when
# apt-get is available and we may use it) and build build/mkb. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
# the CUDA toolkit, when installed in its usual place, builds the CUDA backend
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
if command -v apt-get >/dev/null 2>&1 && [ "${MKB_NO_APT:-0}" != 1 ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    pkgs=$(grep -v '^\s*#' .ci/packages | grep -v '^\s*$' | tr '\n' ' ')
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
fi
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc 2>/dev/null || echo 2)"
echo "mkb is built: $(pwd)/build/mkb"
