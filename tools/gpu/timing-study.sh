#!/usr/bin/env bash
# On a GPU host: where the host time inside a timed call goes, and how much each part of the
# grader adds. Phases (any subset, in order):
#   build    build mkb and the grader child here against the host's own Python
#            (tools/gpu/remote-build.sh into build-host/; the child links the static libpython
#            when the host ships one; the verdicts' environment.python_linkage says which)
#   host     the host-built child: each timing kernel graded MKB_SPREAD_N times (the spread),
#            then with each part of the grader switched off (MKB_OVERHEAD_DIAGS, MKB_OVERHEAD_N
#            rounds)
#   bundle   the carried bundle's child (.grade-bundle, shared libpython): the spread again
#   paper    the paper's loop in plain Python (tools/gpu/paper_loop.py), 3 runs per kernel
# Results land in OUTDIR/{host,bundle,paper}/ (validate-grader.sh's layout and summary).
#
# usage: tools/gpu/timing-study.sh OUTDIR [PHASE...]      (default: build host bundle paper)
# MKB_SITE as for validate-grader.sh; MKB_DEADLINE bounds each phase's grading (default 240 s).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: tools/gpu/timing-study.sh OUTDIR [PHASE...]}
shift
phases=${*:-build host bundle paper}
mkdir -p "$out"
export MKB_DEADLINE=${MKB_DEADLINE:-240}
export MKB_OVERHEAD_DIAGS=${MKB_OVERHEAD_DIAGS:-verify-each no-pin keep-gc no-callbacks no-activity no-trace}
for phase in $phases; do
    echo "== $phase ($(date +%T))"
    case $phase in
    build)
        py=/usr/bin/python3.12
        [[ -x $py ]] || py=$(command -v python3)
        ls "$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("LIBPL"))')" 2>&1 | grep -i libpython
        MKB_CHILD_PYTHON=$py MKB_TARGETS="mkb mkb-grade-child" bash "$root/tools/gpu/remote-build.sh" \
            "$root/build-host" >"$out/build.log" 2>&1
        echo "build rc=$? ($(grep -ci 'static' "$out/build.log") lines mention static)"
        tail -3 "$out/build.log"
        ;;
    host)
        [[ -x $root/build-host/mkb-grade-child ]] || { echo "no build-host/mkb-grade-child: run the build phase"; continue; }
        MKB_BIN=$root/build-host MKB_OVERHEAD_N=${MKB_OVERHEAD_N:-2} \
            bash "$root/tools/gpu/validate-grader.sh" "$out/host" spread overhead 2>&1 | tail -40
        ;;
    bundle)
        MKB_SPREAD_N=${MKB_BUNDLE_N:-3} bash "$root/tools/gpu/validate-grader.sh" "$out/bundle" spread 2>&1 | tail -8
        ;;
    paper)
        bash "$root/tools/gpu/validate-grader.sh" "$out/paper" paper 2>&1 | tail -8
        ;;
    *) echo "unknown phase $phase" ;;
    esac
done
