#!/usr/bin/env bash
# On a GPU host: run the CUDA backend's checks and benchmarks and leave what they print in OUTDIR
# (log.txt: everything, in order; perf.json, bench.json, torch.json, doctor.json, refs.tsv).
# The programs come from .gpu-bundle/bin (tools/gpu/bundle.sh, built elsewhere and copied) or,
# with MKB_BIN=DIR, from a build made on the host (tools/gpu/remote-build.sh).
#
# usage: tools/gpu/run-checks.sh OUTDIR [STEP...]
# steps, in the order given (default: env rng ops problems perf doctor bench torch refs):
#   env       the machine: GPU, driver, toolkit, and whether the programs find their libraries
#   rng       test_cuda_rng: every generator bit-identical to the CPU
#   ops       test_cuda_ops: the cross-backend op test
#   problems  test_cuda_problems: every problem at test scale against the CPU
#   perf      test_cuda_ops --perf: the perf table against the measured ceilings
#   doctor    mkb doctor --json
#   bench     bench_eager: the eager baseline of every problem at full scale
#   torch     eager_torch.py: the same programs in PyTorch eager, compared with bench's times
#   refs      mkb ref <id> --backend cuda --scale full in both precisions, every problem
# MKB_REF_IDS limits refs to those problem ids. MKB_REPS / MKB_WARMUP set bench's and torch's repeats (default 20 / 5); MKB_REF_TIMEOUT the
# limit of one full-scale ref run in seconds (default 150); MKB_DEADLINE stops starting steps
# after that many seconds (default 540).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: run-checks.sh OUTDIR [STEP...]}
shift
steps=${*:-env rng ops problems perf doctor bench torch refs}
bin=${MKB_BIN:-$root/.gpu-bundle/bin}
# Our programs get the bundled libraries the host lacks (not the ones it has: the host's own
# Python and torch must keep theirs) and the toolkit's CUDA libraries.
source "$root/tools/gpu/lib.sh"
libdir=/tmp/mkb-libs
link_missing_libs "$root/.gpu-bundle/lib" "$libdir"
cudalib=/usr/local/cuda/lib64
if ! ldconfig -p | grep -q 'libcublasLt.so.13 ' && [ ! -e "$cudalib/libcublasLt.so.13" ]; then
    found=$(find / -name 'libcublasLt.so.13' -not -path '/proc/*' 2>/dev/null | head -1)
    [ -n "$found" ] && cudalib=$(dirname "$found")
fi
mkb_env() { LD_LIBRARY_PATH="$libdir:$cudalib:${LD_LIBRARY_PATH:-}" "$@"; }
export MKB_CACHE_DIR=${MKB_CACHE_DIR:-/tmp/mkb-cache}
reps=${MKB_REPS:-20}
warm=${MKB_WARMUP:-5}
deadline=${MKB_DEADLINE:-540}
mkdir -p "$out"
log=$out/log.txt
t_start=$(date +%s)
summary=()

run_step() {
    local name=$1
    shift
    local t0 t1 rc
    if (($(date +%s) - t_start > deadline)); then
        echo "=== $name: skipped (past the ${deadline}s deadline)" | tee -a "$log"
        summary+=("$name: skipped")
        return
    fi
    echo "=== $name: $*" >>"$log"
    t0=$(date +%s.%N)
    "$@" >>"$log" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    local line
    line=$(awk -v n="$name" -v r="$rc" -v a="$t0" -v b="$t1" 'BEGIN { printf "%s: rc %d, %.1f s", n, r, b - a }')
    echo "=== $line" >>"$log"
    summary+=("$line")
}

step_env() {
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
    nvcc --version | tail -2
    cat /etc/os-release | head -2
    for b in "$bin"/*; do
        [ -x "$b" ] && [ ! "${b##*.}" = py ] || continue
        miss=$(mkb_env ldd "$b" | grep 'not found')
        echo "$(basename "$b"): ${miss:-all libraries found}"
    done
    echo "bundled libraries used: $(ls "$libdir" | tr '\n' ' ')"
    echo "CUDA libraries from: $cudalib"
    python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))'
    for h in jansson.h openssl/evp.h curl/curl.h zstd.h criterion/criterion.h microhttpd.h; do
        [ -e "/usr/include/$h" ] && echo "header $h: present" || echo "header $h: missing"
    done
    pkg-config --list-all 2>/dev/null | grep -Ei 'jansson|libcurl|libzstd|openssl|libcrypto|criterion|microhttpd|python' || true
}

step_refs() {
    local ids=${MKB_REF_IDS:-}
    [ -n "$ids" ] || ids=$(mkb_env "$bin/mkb" problems --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(" ".join(str(p["id"]) for p in (d["problems"] if isinstance(d, dict) else d)))')
    printf 'id\tprecision\trc\twall_s\treference_s\tnonfinite\toutputs\n' >"$out/refs.tsv"
    for id in $ids; do
        for prec in compute fp64; do
            if (($(date +%s) - t_start > deadline)); then
                printf '%s\t%s\tskipped\t\t\t\t\n' "$id" "$prec" >>"$out/refs.tsv"
                continue
            fi
            local t0 t1 rc
            t0=$(date +%s.%N)
            mkb_env timeout "${MKB_REF_TIMEOUT:-150}" "$bin/mkb" ref "$id" --backend cuda --precision "$prec" --scale full --json \
                >/tmp/ref.json 2>/tmp/ref.err
            rc=$?
            t1=$(date +%s.%N)
            python3 - "$id" "$prec" "$rc" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" >>"$out/refs.tsv" <<'PY'
import json, sys
pid, prec, rc, wall = sys.argv[1:]
ref, nonfinite, outs = "", "", ""
try:
    d = json.load(open("/tmp/ref.json"))
    ref = "%.3f" % d["wall_s"]["reference"]
    nonfinite = str(sum(o["nonfinite"] for o in d["outputs"]))
    outs = "; ".join("%s %s %s mean %.4g" % (o["name"], o["dtype"], o["shape"], o["mean"] or 0) for o in d["outputs"])
except Exception:
    outs = open("/tmp/ref.err").read().strip().replace("\n", " ")[:300]
print("\t".join([pid, prec, rc, "%.1f" % float(wall), ref, nonfinite, outs]))
PY
        done
    done
    cat "$out/refs.tsv"
}

for s in $steps; do
    case $s in
    env) run_step env step_env ;;
    rng) run_step rng mkb_env "$bin/test_cuda_rng" ;;
    ops) run_step ops mkb_env "$bin/test_cuda_ops" ;;
    problems) run_step problems mkb_env "$bin/test_cuda_problems" ;;
    perf) run_step perf mkb_env "$bin/test_cuda_ops" --perf --json "$out/perf.json" ;;
    doctor) run_step doctor mkb_env sh -c "'$bin/mkb' doctor --json > '$out/doctor.json'; cat '$out/doctor.json'" ;;
    bench) run_step bench mkb_env "$bin/bench_eager" --reps "$reps" --warmup "$warm" --json "$out/bench.json" ;;
    torch) run_step torch python3 "$root/tests/gpu/eager_torch.py" "$out/bench.json" --reps "$reps" --warmup "$warm" --json "$out/torch.json" ;;
    refs) run_step refs step_refs ;;
    *) echo "unknown step '$s'" | tee -a "$log" ;;
    esac
done
echo "=== summary"
printf '%s\n' "${summary[@]}"
