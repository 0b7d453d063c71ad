#!/usr/bin/env python3
"""Every file path and C name the documentation gives must exist.

    python3 tests/docs_paths.py [SOURCE_ROOT]

- Paths: in README.md, docs/*.md, python/README.md, configs/*.conf and the
  comments and strings of src/, include/, python/, scripts/, tests/ and
  CMakeLists.txt, every path that starts with a folder of the tree
  (src/, include/, docs/, tests/, scripts/, configs/, python/), and in the
  C sources every path written from src/ as the includes are (worker/serve.c).
  A path exists as written; `{a,b}` is each of a and b; `*`, `<...>` and an
  all-capital placeholder (NAME, STEM) match any name; a path ending in /
  must be a folder; an output prefix (`--out docs/img/fc-ntk`) must begin
  some file's name followed by - or .
- File names: in the Markdown, a backticked file name without a folder
  (`engine.c`, `e2e_lib.sh`, `NAME_impl.h`) must be the name of some file
  of the tree, or of a header the code includes with <...> (`mpi.h`).
- Sections: `docs/PAGE.md, "Title"` (or `PAGE.md ("Title")`) anywhere: PAGE
  has a heading that begins with Title (a history entry's date aside).
- C names: in the Markdown, every backticked `ntk_*`, `ntkd_*`, `NTK_*`
  and `NTKD_*` name; in docs/ARCHITECTURE.md every backticked name with
  an underscore or a () (`ntk_engine_compute`, `compute_tile`,
  `kernel_fn`): each must occur as a word in the code (src/, include/,
  python/, scripts/, tests/, CMakeLists.txt).

It first shows it can say no, on a made-up page.
"""

import fnmatch
import glob
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
TOP = ("src", "include", "docs", "tests", "scripts", "configs", "python")
ROOMS = ("base", "comm", "kernels", "backend", "worker", "coordinator", "store", "job", "solve", "train", "lib")
CODE_DIRS = ("src", "include", "python", "scripts", "tests")
SKIP_DIRS = {"build", "__pycache__", ".git", "out", "data"}
# Paths that name something outside this tree, with where and why.
ELSEWHERE = {"include/crt/host_runtime.h": "a CUDA toolkit's file (scripts/cuda12_toolchain.sh checks for it)"}

PATH_RE = re.compile(r"(?<![\w./@$-])((?:%s)/[\w./*<>{},-]*[\w*>}/])" % "|".join(TOP))
ROOM_RE = re.compile(r"(?<![\w./@$-])((?:%s)/[\w./-]*\.(?:c|h|cu))\b" % "|".join(ROOMS))
TICK_RE = re.compile(r"`([^`\n]+)`")
FILE_RE = re.compile(r"^[\w.<>*-]+\.(?:c|h|cu|sh|py)$")
CNAME_RE = re.compile(r"\b(?:ntkd?|NTKD?)_\w+")
IDENT_RE = re.compile(r"^([A-Za-z_]\w*)(\(\))?$")
SECTION_RE = re.compile(r'\b((?:docs/)?[A-Z][A-Z-]+\.md),? \(?"([A-Za-z0-9][^"\n]*)"')


def headings(page):
    """A page's section titles, without the date of a history entry."""
    try:
        text = open(os.path.join(ROOT, page), errors="replace").read()
    except OSError:
        return None
    return [re.sub(r"^\d{4}-\d{2}-\d{2} — ", "", h.strip()) for h in re.findall(r"^#+ (.*)$", text, re.M)]


def tree_files():
    out = []
    for top, dirs, files in os.walk(ROOT):
        rel = os.path.relpath(top, ROOT)
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not (rel == "." and d not in TOP)]
        out += [os.path.join(rel, f) if rel != "." else f for f in files]
    return out


FILES = tree_files()
BASENAMES = {os.path.basename(f) for f in FILES}


def code_words():
    words = set()
    me = os.path.relpath(os.path.abspath(__file__), ROOT)  # not this file: its made-up page's names
    paths = [f for f in FILES if f.split(os.sep)[0] in CODE_DIRS and f != me] + ["CMakeLists.txt"]
    for f in paths:
        try:
            words.update(re.findall(r"\w+", open(os.path.join(ROOT, f), errors="replace").read()))
        except OSError:
            pass
    return words


WORDS = code_words()
# Headers of other projects the code includes (`mpi.h`, `cublas_v2.h`).
SYSTEM_HEADERS = {os.path.basename(h) for f in FILES if f.endswith((".c", ".h", ".cu"))
                  for h in re.findall(r"#include <([^>]+)>", open(os.path.join(ROOT, f), errors="replace").read())}


def braces(p):
    m = re.search(r"\{([^{}]*)\}", p)
    if not m:
        return [p]
    return [q for alt in m.group(1).split(",") for q in braces(p[:m.start()] + alt + p[m.end():])]


def path_exists(p):
    for q in braces(p):
        full = os.path.join(ROOT, q)
        if q.endswith("/"):
            if not os.path.isdir(full):
                return False
            continue
        if os.path.exists(full):
            continue
        pat = re.sub(r"<[^<>]*>", "*", q)
        pat = re.sub(r"(?<![A-Za-z])[A-Z][A-Z_]{2,}(?![a-z])", "*", pat) if not os.path.exists(full) else pat
        if "*" in pat and glob.glob(os.path.join(ROOT, pat)):
            continue
        if glob.glob(glob.escape(full) + "-*") or glob.glob(glob.escape(full) + ".*"):
            continue  # an output prefix
        return False
    return True


def check_text(name, text, markdown, architecture=False, c_source=False):
    """The problems of one file's text, as 'name:line: ...' strings."""
    bad = []

    def line_of(pos):
        return text.count("\n", 0, pos) + 1

    original = text
    if c_source:  # comments only: string literals are the tests' made-up paths and the includes
        text = re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)
    for m in PATH_RE.finditer(text):
        p = m.group(1)
        if p in ELSEWHERE:
            continue
        if text[m.end():m.end() + 1] == "$":  # tests/fuzz/fuzz_$t.c: a prefix
            p += "*"
        if not path_exists(p):
            bad.append(f"{name}:{line_of(m.start())}: {m.group(1)}: no such file or folder")
    for m in SECTION_RE.finditer(original):
        page, title = m.group(1), m.group(2)
        if page != "README.md" and not page.startswith("docs/"):
            page = "docs/" + page
        found = headings(page)
        if found is not None and not any(h.startswith(title) for h in found):
            bad.append(f'{name}:{line_of(m.start())}: {page}, "{title}": no such section')
    if c_source:
        for m in ROOM_RE.finditer(text):
            if not path_exists("src/" + m.group(1)):
                bad.append(f"{name}:{line_of(m.start())}: {m.group(1)} (from src/): no such file")
    if markdown:
        for m in TICK_RE.finditer(text):
            span = m.group(1).strip()
            if FILE_RE.match(span) and span not in SYSTEM_HEADERS:
                pat = re.sub(r"<[^<>]*>", "*", span)
                pat = re.sub(r"(?<![A-Za-z])[A-Z][A-Z_]{2,}(?![a-z])", "*", pat)  # NAME_impl.h
                if not any(fnmatch.fnmatchcase(b, pat) for b in BASENAMES):
                    bad.append(f"{name}:{line_of(m.start())}: `{span}`: no file of that name in the tree")
            for c in CNAME_RE.findall(span):
                if c not in WORDS and not c.endswith("_"):  # `ntk_comm_*`: a family
                    bad.append(f"{name}:{line_of(m.start())}: `{c}`: not a name in the code")
            ident = IDENT_RE.match(span)
            if architecture and ident and ("_" in ident.group(1) or ident.group(2)) \
                    and not CNAME_RE.fullmatch(ident.group(1)) and ident.group(1) not in WORDS:
                bad.append(f"{name}:{line_of(m.start())}: `{span}`: not a name in the code")
    return bad


def self_test():
    page = ("See `src/worker/no_such_file.c`, src/kernels/ and docs/img/fc-ntk (docs/GPU.md, \"No such section\").\n"
            "The loop is `ntk_no_such_function` in `nowhere.c`; `made_up_name()` and `ntk_engine_compute`.\n")
    got = check_text("made-up.md", page, markdown=True, architecture=True)
    want = ["made-up.md:1: src/worker/no_such_file.c: no such file or folder",
            "made-up.md:2: `ntk_no_such_function`: not a name in the code",
            "made-up.md:2: `nowhere.c`: no file of that name in the tree",
            "made-up.md:2: `made_up_name()`: not a name in the code",
            'made-up.md:1: docs/GPU.md, "No such section": no such section']
    assert sorted(got) == sorted(want), f"the checker itself is wrong:\n  got  {got}\n  want {want}"
    got = check_text("made-up.c", "/* see worker/worker.c and worker/serve.c */", markdown=False, c_source=True)
    assert got == ["made-up.c:1: worker/worker.c (from src/): no such file"], got


def main():
    self_test()
    docs = ["README.md", "python/README.md"] + sorted(glob.glob("docs/*.md", root_dir=ROOT)) \
        if sys.version_info >= (3, 10) else ["README.md", "python/README.md"] + sorted(
            os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
    made_up = {os.path.join("tests", "docs_paths.py"), os.path.join("tests", "floors.py")}  # their self-tests' paths
    code = sorted(f for f in FILES if f.split(os.sep)[0] in CODE_DIRS + ("configs",) and f not in made_up
                  and re.search(r"\.(c|h|cu|py|sh|conf|sbatch|toml|in|map|txt)$", f)
                  and not f.startswith(os.path.join("tests", "data")))
    code.append("CMakeLists.txt")
    problems = []
    for f in docs:
        text = open(os.path.join(ROOT, f), errors="replace").read()
        problems += check_text(f, text, markdown=True, architecture=f == "docs/ARCHITECTURE.md")
    for f in code:
        text = open(os.path.join(ROOT, f), errors="replace").read()
        problems += check_text(f, text, markdown=False, c_source=f.endswith((".c", ".h", ".cu")))
    for p in problems:
        print("FAIL " + p)
    print(f"docs_paths: {len(docs)} pages and {len(code)} files of code, {len(problems)} path(s) or name(s) "
          "that do not exist")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
