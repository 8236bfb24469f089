# Shell helpers shared by the scripts in tools/gpu that run on a GPU host.

# link_missing_libs BUNDLE_LIB_DIR LINK_DIR: LINK_DIR gets a link to each library of the bundle
# that the host lacks (not to the ones it has: the host's own Python and torch keep theirs), for
# LD_LIBRARY_PATH.
link_missing_libs() {
    rm -rf "$2"
    mkdir -p "$2"
    local l
    for l in "$1"/*; do
        [ -e "$l" ] || continue
        ldconfig -p | grep -q "$(basename "$l") " || ln -s "$l" "$2/"
    done
}
