#!/usr/bin/env python3
"""dsl_docs.py: write a DSL's API reference from the installed package, for a task's docs/.

    python3 dsl_docs.py OUT_DIR PACKAGE MODULE [MODULE...]

For every MODULE (the first is the package's root import) it writes OUT_DIR/<module>.txt: the
module's documentation as pydoc renders it in plain text, with the host-specific parts removed
(object addresses, the FILE section) so that the same installed package always gives the same
bytes. Each file is capped, and so is the whole set. OUT_DIR/index.txt lists what was written
with the package's version.

Exit status: 0 written; 3 the root module cannot be imported (the first line of stderr says
why); 2 usage. A listed submodule that fails to import is noted in index.txt and skipped.
It never reads the network and writes nothing outside OUT_DIR. MKB_SITE (directories separated by
':') adds site directories first, for DSLs unpacked from wheels rather than installed.
"""
import importlib
import importlib.metadata
import io
import os
import pydoc
import re
import site
import sys

PER_MODULE_MAX = 400_000
TOTAL_MAX = 3_000_000

ADDR = re.compile(r" at 0x[0-9a-fA-F]+")


def render(mod):
    text = pydoc.render_doc(mod, title="%s", renderer=pydoc.plaintext)
    text = ADDR.sub("", text)
    out, skip = [], False
    for line in text.splitlines():
        if line in ("FILE", "PACKAGE CONTENTS"):
            skip = line == "FILE"
            if skip:
                continue
        elif skip and line and not line.startswith(" "):
            skip = False
        if not skip:
            out.append(line.rstrip())
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) < 3:
        print("usage: dsl_docs.py OUT_DIR PACKAGE MODULE [MODULE...]", file=sys.stderr)
        return 2
    out_dir, package, modules = argv[0], argv[1], argv[2:]
    # MKB_SITE: site directories of unpacked wheels (an offline GPU host's DSLs), as mkb grade --site
    for d in os.environ.get("MKB_SITE", "").split(os.pathsep):
        if d:
            site.addsitedir(d)
    try:
        importlib.import_module(modules[0])
    except Exception as e:  # any failure to import means: not usable here
        print("cannot import %s (%s: %s)" % (modules[0], type(e).__name__, str(e).splitlines()[0] if str(e) else ""),
              file=sys.stderr)
        return 3
    try:
        version = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    os.makedirs(out_dir, exist_ok=True)
    index = io.StringIO()
    index.write("API reference of %s %s, generated from the installed package with pydoc.\n\n" % (package, version))
    total = 0
    for name in modules:
        try:
            mod = importlib.import_module(name)
            text = render(mod)
        except Exception as e:
            index.write("%-40s not available: %s\n" % (name, type(e).__name__))
            continue
        if len(text) > PER_MODULE_MAX:
            text = text[:PER_MODULE_MAX] + "\n[... cut at %d characters; read the module's source for the rest]\n" % PER_MODULE_MAX
        if total + len(text) > TOTAL_MAX:
            index.write("%-40s left out: the reference is capped at %d characters\n" % (name, TOTAL_MAX))
            continue
        total += len(text)
        with open(os.path.join(out_dir, name + ".txt"), "w", encoding="utf-8") as f:
            f.write(text)
        index.write("%-40s %s.txt\n" % (name, name))
    with open(os.path.join(out_dir, "index.txt"), "w", encoding="utf-8") as f:
        f.write(index.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
