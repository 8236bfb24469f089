#!/usr/bin/env bash
# On a Debian/Ubuntu machine with network access: download into .debs/ (git-ignored through
# .git/info/exclude) the development packages a GPU host lacks for building mkb there
# (tools/gpu/remote-build.sh unpacks them). The GPU image was seen to have the headers of
# OpenSSL, zstd, libcurl and CPython but not jansson's.
#
# usage: tools/gpu/fetch-debs.sh [PACKAGE...]   (default: libjansson-dev libjansson4 libsqlite3-dev)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$root/.debs"
cd "$root/.debs"
if [ $# -eq 0 ]; then set -- libjansson-dev libjansson4 libsqlite3-dev; fi
apt-get download "$@"
ls -la
