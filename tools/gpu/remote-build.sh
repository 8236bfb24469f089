#!/usr/bin/env bash
# On a GPU host: build mkb there with the CUDA backend and its GPU programs (cmake; ninja when
# present, make otherwise), for when the programs cannot be built elsewhere and copied
# (tools/gpu/bundle.sh). Development packages the host lacks are unpacked from the .deb files
# copied along in .debs/ (tools/gpu/fetch-debs.sh) into /tmp/mkb-deps, their pkg-config files
# pointed there. Unit tests (Criterion) are not built: the GPU host runs the GPU programs.
# Afterwards: MKB_BIN=BUILD_DIR tools/gpu/run-checks.sh OUTDIR, or MKB_BIN=BUILD_DIR
# tools/gpu/validate-grader.sh OUTDIR for the grader built against the host's own Python.
#
# usage: tools/gpu/remote-build.sh [BUILD_DIR]   (default: build-gpu)
# MKB_FORCE_DEBS=1 uses the packages in .debs/ even where pkg-config finds the host's.
# MKB_TARGETS="mkb mkb-grade-child" builds only those targets (default: mkb, the GPU test
# programs, bench_eager and the grader child).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-gpu}
deps=/tmp/mkb-deps
missing=()
for pc in jansson libcurl libzstd libcrypto sqlite3; do
    if [ -n "${MKB_FORCE_DEBS:-}" ] || ! pkg-config --exists "$pc"; then missing+=("$pc"); fi
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "remote-build: not on this host: ${missing[*]}; unpacking .debs/"
    ls "$root"/.debs/*.deb >/dev/null 2>&1 || { echo "remote-build: no .debs/*.deb (run tools/gpu/fetch-debs.sh and copy .debs along)" >&2; exit 3; }
    rm -rf "$deps"
    mkdir -p "$deps"
    for d in "$root"/.debs/*.deb; do dpkg -x "$d" "$deps"; done
    pcdir=$deps/usr/lib/x86_64-linux-gnu/pkgconfig
    for pc in "$pcdir"/*.pc; do sed -i "s#^prefix=.*#prefix=$deps/usr#" "$pc"; done
    export PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
fi
export PATH="/usr/local/cuda/bin:$PATH"
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
# the grader child embeds MKB_CHILD_PYTHON's CPython (default: the python3 on PATH), statically
# when that Python ships libpython3.X.a (CMakeLists.txt says why)
cmake -S "$root" -B "$build" "${gen[@]}" -DMKB_TESTS=OFF -DMKB_CUDA=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    ${MKB_CHILD_PYTHON:+-DMKB_CHILD_PYTHON="$MKB_CHILD_PYTHON"}
if [[ -n ${MKB_TARGETS:-} ]]; then
    read -ra targets <<<"$MKB_TARGETS"
else
    targets=(mkb test_cuda_ops test_cuda_rng test_cuda_problems bench_eager)
    cmake --build "$build" --target help 2>/dev/null | grep -q 'mkb-grade-child' && targets+=(mkb-grade-child)
fi
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
echo "remote-build: built in $build"
