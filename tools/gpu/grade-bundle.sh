#!/usr/bin/env bash
# Build mkb and the grader child on this machine (it needs the CUDA toolkit and a CPython of the
# GPU host's minor version with its embedding library, not a GPU) and pack them into
# .grade-bundle/ (git-ignored) with the shared libraries a GPU host may lack. Carry .grade-bundle
# to the GPU host and run tools/gpu/validate-grader.sh there.
#
# usage: tools/gpu/grade-bundle.sh [PYTHON]
#   PYTHON: the interpreter whose libpython the child embeds; it must have the GPU host's
#           minor version (3.12 on the H200 image). Default: the first python3.12 found.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
py=${1:-}
if [[ -z $py ]]; then
    for cand in python3.12 /root/.pyenv/versions/3.12*/bin/python3.12 /usr/bin/python3.12; do
        # a version-manager shim may exist and still refuse to run: try it
        if command -v "$cand" >/dev/null 2>&1 && "$cand" -c '' >/dev/null 2>&1; then py=$(command -v "$cand"); break; fi
    done
fi
[[ -n $py ]] || { echo "no python3.12 here: pass the interpreter to embed" >&2; exit 2; }
build=$root/build-grade-bundle
out=$root/.grade-bundle
grep -qx '/.grade-bundle/' "$root/.git/info/exclude" 2>/dev/null || echo '/.grade-bundle/' >>"$root/.git/info/exclude"
# The child links libpython3.X.so here, which the GPU host resolves to its own (same minor
# version, exact patch level). A static libpython would pin this machine's patch release inside
# the child; for the faster static embedding, build the child on the GPU host
# (tools/gpu/remote-build.sh), where it links the host's own libpython3.X.a.
cmake -S "$root" -B "$build" -G Ninja -DMKB_TESTS=OFF -DMKB_CUDA=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMKB_CHILD_PYTHON="$py" -DMKB_CHILD_STATIC_PYTHON=OFF >/dev/null
cmake --build "$build" --target mkb mkb-grade-child
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp "$build/mkb" "$build/mkb-grade-child" "$out/bin/"
# the embedding probe (tools/gpu/pyembed_probe.c): the paper's loop in an interpreter embedded as
# the child embeds it; linked by soname only, so the GPU host's own libpython3.12 is used
pyc="$py-config"
[[ -x $pyc ]] || pyc="$(dirname "$py")/python3.12-config"
if [[ -x $pyc ]]; then
    gcc -O2 -Wall -Wextra -Werror $("$pyc" --includes) "$root/tools/gpu/pyembed_probe.c" -o "$out/bin/pyembed_probe" \
        -L"$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))')" -lpython3.12 -ldl -lm
fi
# the CUPTI cost probe (tools/gpu/cupti_probe.cu): what kernel tracing costs a launch
if command -v nvcc >/dev/null 2>&1; then
    nvcc -O2 -arch=sm_90 "$root/tools/gpu/cupti_probe.cu" -o "$out/bin/cupti_probe" -lcupti -lcuda
fi
# bubblewrap for the protocol's sandbox (tools/gpu/protocol-run.sh), when the GPU host has none
if command -v bwrap >/dev/null 2>&1; then cp "$(command -v bwrap)" "$out/bin/"; fi
# every shared library they use except the C runtime, libstdc++, CUDA's and libpython (the host's
# own Python must be used); validate-grader.sh puts on the library path only those the host lacks
for p in mkb mkb-grade-child bwrap; do [[ -e $out/bin/$p ]] || continue; ldd "$out/bin/$p"; done | awk '/=>/ {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|libresolv|libnsl|libutil|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so|cuda|cublas|libpython' |
    while read -r lib; do cp -L "$lib" "$out/lib/"; done
"$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])' >"$out/python-version"
git -C "$root" rev-parse HEAD >"$out/source-commit" 2>/dev/null || true
du -sh "$out"
ls "$out/bin" "$out/lib"
