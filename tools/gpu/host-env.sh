# Sourced by the scripts in tools/gpu that run mkb on a GPU host: puts on the library path the
# shared libraries of .grade-bundle/lib that the host lacks, finds the CUPTI of the installed
# toolkit, and sets MKB (the mkb binary), PY (the Python the DSLs run in) and SITE (the --site
# arguments for MKB_SITE, a directory of unpacked wheels). Needs $root, the repository root.
bin=${MKB_BIN:-$root/.grade-bundle/bin}
source "$root/tools/gpu/lib.sh"
libdir=/tmp/mkb-grade-libs
link_missing_libs "$root/.grade-bundle/lib" "$libdir"
export LD_LIBRARY_PATH="$libdir:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="/usr/local/cuda/bin:$PATH"
export MKB_CACHE_DIR=${MKB_CACHE_DIR:-/tmp/mkb-cache}
if [[ -z ${MKB_CUPTI_LIB:-} ]]; then
    # the CUPTI of the installed toolkit's major version (an older one, e.g. inside a profiler
    # package, does not work with this driver)
    major=$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
    for d in /usr/local/cuda /usr/local/cuda-${major:-13} /usr/lib /opt; do
        cupti=$(find "$d/" -name "libcupti.so.${major:-13}*" -not -path '*/stubs/*' -not -path '*nsight*' 2>/dev/null |
            sort | head -1)
        [[ -n $cupti ]] && break
    done
    [[ -n $cupti ]] && export MKB_CUPTI_LIB=$cupti
fi
MKB=$bin/mkb
PY=${MKB_PYTHON:-$(command -v python3)}
SITE=()
[[ -n ${MKB_SITE:-} ]] && SITE=(--site "$MKB_SITE")
