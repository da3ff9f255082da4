#!/usr/bin/env python3
# Copyright 2026 the jaccl authors.
"""Fails when a file of src/ includes a file of a higher layer.

Layers, lowest first: common -> bootstrap -> transport -> collectives ->
group; the files at src/ itself (config.cpp, init.cpp) sit above them all.
A file may include its own layer and any lower one; public headers
(include/jaccl/) and system headers are open to every layer.

ALLOWED lists the violations known today, each with why it is still there.
The check fails on any violation not listed, and on a listed one that no
longer exists (so fixing a violation also shrinks the list).
"""
import argparse
import pathlib
import re
import sys

LAYERS = ["common", "bootstrap", "transport", "collectives", "group"]
TOP = len(LAYERS)  # src/*.cpp

# (including file, included file), paths relative to src/.
# None today; a new entry says why it cannot be fixed yet.
ALLOWED = set()

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def layer_of(rel):
    """The layer of a path relative to src/, or None outside the layers."""
    parts = pathlib.PurePosixPath(rel).parts
    if len(parts) == 1:
        return TOP
    return LAYERS.index(parts[0]) if parts[0] in LAYERS else None


def resolve(src, path, name):
    """The included file relative to src/, or None (public or system)."""
    for base in (path.parent, src):
        cand = (base / name).resolve()
        if cand.is_file() and src in cand.parents:
            return cand.relative_to(src).as_posix()
    return None


def sources(src):
    for path in sorted(src.rglob("*")):
        if path.suffix in (".h", ".cpp", ".cc", ".hpp"):
            yield path, path.relative_to(src).as_posix()


def unplaced(src):
    """Directories of src/ that are no layer: a new one must be placed."""
    return sorted({rel.split("/")[0] for _, rel in sources(src)
                   if layer_of(rel) is None})


def violations(src):
    found = set()
    for path, rel in sources(src):
        mine = layer_of(rel)
        if mine is None:
            continue
        for name in INCLUDE.findall(path.read_text(errors="replace")):
            target = resolve(src, path, name)
            if target is None:
                continue
            theirs = layer_of(target)
            if theirs is not None and theirs > mine:
                found.add((rel, target))
    return found


def name_of(layer):
    return LAYERS[layer] if layer < TOP else "src/"


def check(src, allowed):
    """Prints every problem; 0 if none, else 1."""
    found = violations(src)
    new = sorted(found - allowed)
    stale = sorted(allowed - found)
    order = " -> ".join(LAYERS + ["src/"])
    dirs = unplaced(src)
    for d in dirs:
        print(f"src/{d}/ is in no layer: add it to LAYERS in "
              f"tests/layering/check_layers.py (order: {order})")
    for a, b in new:
        print(f"{a} includes {b}: {name_of(layer_of(a))} sits below "
              f"{name_of(layer_of(b))} (order: {order})")
    for a, b in stale:
        print(f"allow-list entry ({a}, {b}) matches no include any more: "
              "remove it from ALLOWED in tests/layering/check_layers.py")
    if new or stale or dirs:
        return 1
    print(f"layering ok: {len(found)} known violation(s) allowed")
    return 0


def self_test():
    """The check itself: a new violation and a stale entry both fail."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        src = pathlib.Path(d).resolve()
        for rel, text in {
            "common/a.h": '#include <vector>\n#include "jaccl/group.h"\n',
            "transport/t.h": '#include "common/a.h"\n',
            "transport/t.cpp": '#include "t.h"\n#include "group/g.h"\n',
            "group/g.h": '#include "transport/t.h"\n',
            "init.cpp": '#include "group/g.h"\n',
        }.items():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            (src / rel).write_text(text)
        bad = ("transport/t.cpp", "group/g.h")
        ok = violations(src) == {bad}
        ok &= check(src, set()) == 1  # a violation not allowed
        ok &= check(src, {bad}) == 0
        ok &= check(src, {bad, ("common/a.h", "group/g.h")}) == 1  # stale
        (src / "plugins").mkdir()
        (src / "plugins/p.cpp").write_text('#include "group/g.h"\n')
        ok &= check(src, {bad}) == 1  # a directory in no layer
    print("self-test", "passed" if ok else "FAILED")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--source", help="the repository root")
    ap.add_argument("--self-test", action="store_true",
                    help="check the checker on a made-up tree")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if not args.source:
        ap.error("--source is required")
    src = (pathlib.Path(args.source) / "src").resolve()
    if not src.is_dir():
        print(f"no src/ under {src.parent}", file=sys.stderr)
        return 2
    return check(src, ALLOWED)


if __name__ == "__main__":
    sys.exit(main())
