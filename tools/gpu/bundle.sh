#!/usr/bin/env bash
# Build mkb and its GPU programs on this machine (it needs the CUDA toolkit, not a GPU) and pack
# them into .gpu-bundle/ (git-ignored through .git/info/exclude) with the shared libraries a GPU
# host may lack, so a GPU host runs them without building anything: copy .gpu-bundle there and run
# tools/gpu/run-checks.sh there. The CUDA libraries themselves are not packed (cuBLASLt alone is
# hundreds of MB): the GPU host's toolkit provides them.
#
# usage: tools/gpu/bundle.sh [SOURCE_DIR]   (default: this checkout)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
src=${1:-$root}
build=$root/build-gpu-bundle
out=$root/.gpu-bundle
progs="mkb test_cuda_ops test_cuda_rng test_cuda_problems bench_eager"
cmake -S "$src" -B "$build" -G Ninja -DMKB_TESTS=OFF -DMKB_CUDA=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# shellcheck disable=SC2086
cmake --build "$build" --target $progs
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
for p in $progs; do cp "$build/$p" "$out/bin/"; done
# every shared library the programs use, except the C runtime, libstdc++ and CUDA's;
# run-checks.sh puts on the library path only those the GPU host lacks
for p in $progs; do ldd "$out/bin/$p"; done | awk '/=>/ {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|libresolv|libnsl|libutil|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so|cuda|cublas' |
    while read -r lib; do cp -L "$lib" "$out/lib/"; done
cp "$root/tests/gpu/eager_torch.py" "$out/bin/"
git -C "$root" rev-parse HEAD >"$out/source-commit" 2>/dev/null || true
du -sh "$out"
ls "$out/bin" "$out/lib"
