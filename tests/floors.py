#!/usr/bin/env python3
"""The floors of docs/ARCHITECTURE.md against the real includes.

    python3 tests/floors.py [SOURCE_ROOT]

The page's ```floors block gives each room of src/ a floor ("1 kernels store
comm": floor 1, three rooms; `run` and `main` are src/run.[ch] and
src/main.c, `inspect` src/inspect.[ch]). Every file of src/ must belong to a
room of the block, and every `#include "X"` in it must name a file of its own
room or of a room on a lower floor: an include that goes up, or sideways to
another room of the same floor, fails, as does <mpi.h> outside src/comm/ and
a CUDA header outside src/backend/cuda/. It first shows it can say no.
"""

import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
PAGE = os.path.join(ROOT, "docs", "ARCHITECTURE.md")
ONLY_IN = {"mpi.h": "comm", "cuda_runtime.h": "backend", "cublas_v2.h": "backend"}


def floors_of(page_text):
    m = re.search(r"^```floors\n(.*?)^```", page_text, re.M | re.S)
    if not m:
        raise SystemExit("docs/ARCHITECTURE.md has no ```floors block")
    floors = {}
    for line in m.group(1).splitlines():
        parts = line.split()
        if parts:
            for room in parts[1:]:
                floors[room] = int(parts[0])
    return floors


def room_of(path):
    """src/backend/cuda/x.cu -> backend; src/run.c -> run; include/ntkd.h -> None (public)."""
    parts = path.split("/")
    if parts[0] != "src":
        return None
    if len(parts) == 2:
        return os.path.splitext(parts[1])[0]
    return parts[1]


def problems(floors, files):
    """files: {path: text}. The includes that break the floors."""
    bad = []
    for path, text in sorted(files.items()):
        me = room_of(path)
        if me not in floors:
            bad.append(f"{path}: in no room of the floors block")
            continue
        for n, line in enumerate(text.splitlines(), 1):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if m:
                inc = m.group(1)
                if inc == "ntkd.h":  # the public header: the library's own
                    if me != "lib":
                        bad.append(f"{path}:{n}: includes ntkd.h, the public header (only src/lib/ uses it)")
                    continue
                other = room_of("src/" + inc)
                if other not in floors:
                    bad.append(f"{path}:{n}: includes {inc}, in no room of the floors block")
                elif other != me and floors[other] >= floors[me]:
                    way = "up" if floors[other] > floors[me] else "sideways"
                    bad.append(f"{path}:{n}: {me} (floor {floors[me]}) includes {inc}: {other} is floor "
                               f"{floors[other]} ({way})")
            m = re.match(r"\s*#\s*include\s+<([^>]+)>", line)
            if m and m.group(1) in ONLY_IN:
                where = ONLY_IN[m.group(1)]
                ok = path.startswith("src/comm/") if where == "comm" else path.startswith("src/backend/cuda/")
                if not ok:
                    bad.append(f"{path}:{n}: includes <{m.group(1)}>, which belongs in "
                               f"{'src/comm/' if where == 'comm' else 'src/backend/cuda/'} only")
    return bad


def self_test(floors):
    made_up = {"src/kernels/x.c": '#include "worker/engine.h"\n#include "store/store.h"\n#include "base/status.h"\n',
               "src/job/y.c": "#include <mpi.h>\n", "src/nowhere/z.c": ""}
    got = problems(floors, made_up)
    want = ["src/job/y.c:1: includes <mpi.h>, which belongs in src/comm/ only",
            "src/kernels/x.c:1: kernels (floor 1) includes worker/engine.h: worker is floor 3 (up)",
            "src/kernels/x.c:2: kernels (floor 1) includes store/store.h: store is floor 1 (sideways)",
            "src/nowhere/z.c: in no room of the floors block"]
    assert got == want, f"the checker itself is wrong:\n  got  {got}\n  want {want}"


def main():
    floors = floors_of(open(PAGE).read())
    self_test(floors)
    files = {}
    for top, _, names in os.walk(os.path.join(ROOT, "src")):
        for name in names:
            if name.endswith((".c", ".h", ".cu")):
                full = os.path.join(top, name)
                files[os.path.relpath(full, ROOT).replace(os.sep, "/")] = open(full, errors="replace").read()
    bad = problems(floors, files)
    for b in bad:
        print("FAIL " + b)
    n = sum(len(re.findall(r'^\s*#\s*include\s+"', t, re.M)) for t in files.values())
    print(f"floors: {len(files)} files of src/ in {len(floors)} rooms on {len(set(floors.values()))} floors, "
          f"{n} includes, {len(bad)} against the floors")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
