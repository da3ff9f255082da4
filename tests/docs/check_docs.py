#!/usr/bin/python3
"""Every fenced block of README.md and docs/*.md is exercised, so the docs
cannot rot (ctest label `docs`).

Each block is preceded (on the line before its fence, blank lines allowed) by
one marker saying how it is checked:

  <!-- check: run [needs=T,...] [timeout=S] -->
      a shell block, executed with bash -e -o pipefail in a scratch directory
      where `build` is the build tree and every other top-level entry of the
      source tree is at hand (`examples/`, `scripts/`, `docs/`), with the
      caller's JACCL_*, MLX_*, launcher variables and PYTHONUNBUFFERED
      removed. `needs` names CMake targets the block uses: when one is not
      configured in this build (an optional dependency is missing) the
      block is skipped, said so; when it is configured it must have been
      built.
  <!-- check: output -->
      what the previous `run` block printed: every non-empty line must be a
      line of that output (`...` in a line matches anything).
  <!-- check: file PATH -->
      the block is the whole file PATH (source-relative), which the build or
      another test compiles and runs.
  <!-- check: excerpt PATH -->
      the block's lines are consecutive lines of PATH (indentation removed
      from both, so a piece of a function reads as code on its own).
  <!-- check: not-run REASON -->
      not executed, for the REASON given (it needs machines or hardware the
      test run does not have). At most MAX_NOT_RUN such blocks.

A block without a marker, an unknown marker or a failing check fails the test.

  check_docs.py --source DIR --build DIR [--have TARGET]... [--only FILE]
                [--mlx-sources DIR]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap

# Kept small on purpose: a new not-run block should be a conscious choice.
MAX_NOT_RUN = 12
# What `needs=` may name (a typo must not skip a block for ever): targets and
# the optional dependencies tests/CMakeLists.txt passes as --have.
KNOWN_NEEDS = {"jaccl_python", "jaccl_torch", "zmq_side_channel", "redis",
               "mpi", "pmix", "ofi", "mlx"}
# Pages linked before they exist (none now).
PENDING_PAGES = set()
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(\s*)(```+|~~~+)(.*)$")
SKIPPED = object()  # the last run block was skipped: so is its output
MARKER = re.compile(r"^\s*<!--\s*check:\s*(\S+)\s*(.*?)\s*-->\s*$")
# PYTHONUNBUFFERED too: with it, print() writes a line and its newline in two
# writes, and the lines of ranks sharing one stdout interleave mid-line.
DROP_ENV = re.compile(r"^(JACCL_|MLX_|OMPI_|PMI|PMIX_|SLURM_|RANK$|WORLD_SIZE$|"
                      r"LOCAL_RANK$|MASTER_|PYTHONUNBUFFERED$)")


class Block:
    def __init__(self, path, line, info, text, marker, args):
        self.path, self.line, self.info = path, line, info
        self.text, self.marker, self.args = text, marker, args

    def where(self):
        return f"{self.path}:{self.line}"


def blocks_of(path, rel):
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i, last_marker = [], 0, None
    while i < len(lines):
        m = MARKER.match(lines[i])
        if m:
            last_marker = (m.group(1), m.group(2), i + 1)
            i += 1
            continue
        f = FENCE.match(lines[i])
        if not f:
            if lines[i].strip():
                last_marker = None  # a marker applies only to the next block
            i += 1
            continue
        indent, fence, info = f.group(1), f.group(2), f.group(3).strip()
        start, body = i + 1, []
        i += 1
        while i < len(lines):
            g = FENCE.match(lines[i])
            if g and g.group(2).startswith(fence) and not g.group(3).strip():
                break
            body.append(lines[i][len(indent):] if lines[i].startswith(indent)
                        else lines[i].lstrip())
            i += 1
        else:
            raise SystemExit(f"{rel}:{start}: unterminated fenced block")
        i += 1
        marker, args = (last_marker[0], last_marker[1]) if last_marker else (None, "")
        out.append(Block(rel, start, info, "\n".join(body), marker, args))
        last_marker = None
    return out


def slug(heading):
    """GitHub's anchor for a heading."""
    h = heading.strip().lower()
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors_of(path):
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # not headings in code
    out = {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}
    out |= set(re.findall(r'<a id="([^"]+)">', text))
    return out


def check_links(source, rel):
    """Relative links must reach a file, and an anchor a heading there."""
    problems = []
    text = open(os.path.join(source, rel), encoding="utf-8").read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    for m in LINK.finditer(text):
        target = m.group(1)
        if re.match(r"^[a-z]+:", target):
            continue  # http:, mailto: ...
        path, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(rel), path)) if path else rel
        if dest in PENDING_PAGES:
            continue
        full = os.path.join(source, dest)
        if not os.path.exists(full):
            problems.append(f"{rel}: link to {target}: {dest} does not exist")
        elif anchor and dest.endswith(".md") and anchor not in anchors_of(full):
            problems.append(f"{rel}: link to {target}: no heading '{anchor}' in {dest}")
    return problems


def scratch_tree(source, build):
    d = tempfile.mkdtemp(prefix="jaccl-docs-")
    os.symlink(os.path.abspath(build), os.path.join(d, "build"))
    for name in os.listdir(source):
        if name.startswith(".") or name.startswith("build"):
            continue
        os.symlink(os.path.join(source, name), os.path.join(d, name))
    return d


# --mlx-sources: the pinned MLX sources, so that MLX blocks build from them
# (scripts/mlx.sh, cached) instead of cloning.
MLX_ENV = {}


def job_env():
    env = {k: v for k, v in os.environ.items() if not DROP_ENV.match(k)}
    env.update(MLX_ENV)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if os.geteuid() == 0:  # Open MPI refuses root without these
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    return env


def parse_args(text):
    opts = {}
    for word in text.split():
        k, _, v = word.partition("=")
        opts[k] = v
    return opts


def line_matches(want, got_lines):
    parts = [re.escape(p) for p in want.strip().split("...")]
    rx = re.compile("^" + ".*".join(parts) + "$")
    return any(rx.match(g.strip()) for g in got_lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--have", action="append", default=[],
                    help="a configured optional target (repeatable)")
    ap.add_argument("--only", help="check only this file (source-relative)")
    ap.add_argument("--mlx-sources",
                    help="folder of the pinned MLX archives (needs=mlx)")
    a = ap.parse_args()
    source = os.path.abspath(a.source)
    have = set(a.have)
    if a.mlx_sources:
        have.add("mlx")
        MLX_ENV["MLX_SOURCE"] = os.path.join(a.mlx_sources, "mlx-0.32.1.tar.gz")
        MLX_ENV["MLX_THIRD_PARTY"] = a.mlx_sources
    docs = ["README.md"] + sorted(
        os.path.join("docs", f) for f in os.listdir(os.path.join(source, "docs"))
        if f.endswith(".md"))
    if a.only:
        docs = [a.only]
    failures, not_run, ran, skipped = [], [], 0, 0
    work = scratch_tree(source, a.build)
    try:
        for rel in docs:
            failures += check_links(source, rel)
            last_output = None
            for b in blocks_of(os.path.join(source, rel), rel):
                if b.marker is None:
                    failures.append(f"{b.where()}: block without a <!-- check: ... --> marker")
                elif b.marker == "run":
                    opts = parse_args(b.args)
                    needs = [t for t in opts.get("needs", "").split(",") if t]
                    unknown = [t for t in needs if t not in KNOWN_NEEDS]
                    if unknown:
                        failures.append(f"{b.where()}: needs= names {', '.join(unknown)}, "
                                        f"not one of {', '.join(sorted(KNOWN_NEEDS))}")
                        continue
                    missing = [t for t in needs if t not in have]
                    if missing:
                        print(f"SKIP {b.where()}: {', '.join(missing)} not configured in this build")
                        skipped += 1
                        last_output = SKIPPED
                        continue
                    timeout = float(opts.get("timeout", "300"))
                    print(f"RUN  {b.where()}", flush=True)
                    try:
                        p = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", b.text],
                                           cwd=work, env=job_env(), timeout=timeout,
                                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                           text=True, stdin=subprocess.DEVNULL)
                        last_output = p.stdout
                        if p.returncode != 0:
                            failures.append(f"{b.where()}: exit {p.returncode}:\n{b.text}\n"
                                            f"--- output ---\n{p.stdout[-4000:]}")
                    except subprocess.TimeoutExpired as e:
                        last_output = None
                        failures.append(f"{b.where()}: still running after {timeout:g} s:\n{b.text}")
                    ran += 1
                elif b.marker == "output":
                    if last_output is SKIPPED:
                        continue
                    if last_output is None:
                        failures.append(f"{b.where()}: output block after no executed run block")
                        continue
                    got = last_output.split("\n")
                    for want in b.text.split("\n"):
                        if want.strip() and not line_matches(want, got):
                            failures.append(f"{b.where()}: the command did not print\n  {want}\n"
                                            f"--- it printed ---\n{last_output[-3000:]}")
                            break
                elif b.marker in ("file", "excerpt"):
                    path = os.path.join(source, b.args)
                    if not b.args or not os.path.isfile(path):
                        failures.append(f"{b.where()}: {b.marker} {b.args!r} is not a file")
                        continue
                    text = open(path, encoding="utf-8").read()
                    if b.marker == "file":
                        if text.rstrip("\n") != b.text.rstrip("\n"):
                            failures.append(f"{b.where()}: block differs from {b.args} "
                                            f"(paste the file again)")
                    else:
                        want = textwrap.dedent(b.text.rstrip("\n"))
                        n = want.count("\n") + 1
                        have_lines = text.split("\n")
                        if not any(textwrap.dedent("\n".join(have_lines[k:k + n])) == want
                                   for k in range(len(have_lines))):
                            failures.append(f"{b.where()}: block is not an excerpt of {b.args}")
                elif b.marker == "not-run":
                    if not b.args:
                        failures.append(f"{b.where()}: not-run without a reason")
                    not_run.append(f"{b.where()}: {b.args}")
                else:
                    failures.append(f"{b.where()}: unknown marker '{b.marker}'")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{ran} blocks run, {skipped} skipped, {len(not_run)} not run by design:")
    for n in not_run:
        print("  " + n)
    if not a.only and len(not_run) > MAX_NOT_RUN:
        failures.append(f"{len(not_run)} not-run blocks, more than {MAX_NOT_RUN}: run or check some")
    for f in failures:
        print("\nFAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
