#!/usr/bin/env bash
# The kernel maps' IEEE arithmetic cannot be changed by global CUDA flags
# (CMakeLists.txt: src/backend/cuda/fc_cuda.cu and cnn_cuda.cu carry
# --fmad=false -prec-div=true -prec-sqrt=true -ftz=false). For each global
# flag set below, configures ntkd with CMAKE_CUDA_FLAGS set to it, runs
# CMake's own nvcc line for both files (from compile_commands.json, so the
# per-file options stand where CMake puts them, after the global ones) with
# -keep, and requires the PTX of every architecture to equal the PTX built
# without global flags. A control proves the comparison can fail: the same
# line with the per-file options removed must give different PTX.
#   scripts/cuda_ieee_check.sh [NVCC]   (default: nvcc on PATH)
# Exit 0: pinned; 1: a global flag changed the PTX; 77: no nvcc.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
nvcc=${1:-$(command -v nvcc || true)}
[ -n "$nvcc" ] && [ -x "$nvcc" ] || { echo "cuda_ieee_check: no nvcc; skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
files=(src/backend/cuda/fc_cuda.cu src/backend/cuda/cnn_cuda.cu)
pinned="--fmad=false -prec-div=true -prec-sqrt=true -ftz=false"
sets=("" "--use_fast_math" "-ftz=true -prec-div=false -prec-sqrt=false --fmad=true")
# Architectures: one is enough for the flags; sm_90 is the one run.
configure() { # DIR FLAGS
  cmake -S "$here" -B "$1" -DNTKD_CUDA=ON -DBUILD_TESTING=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
    -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_FLAGS="$2" >"$1.log" 2>&1 ||
    { tail -20 "$1.log"; echo "cuda_ieee_check: configure with CMAKE_CUDA_FLAGS='$2' failed"; exit 1; }
}
ptx() { # BUILD_DIR FILE OUTDIR [drop-pinned]
  local cmd
  cmd=$(python3 - "$1/compile_commands.json" "$2" "${4:-}" "$pinned" <<'EOF'
import json, sys
db, f, drop, pinned = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split()
for e in json.load(open(db)):
    if e["file"].endswith(f):
        words, out = e["command"].split(" "), []
        while words:
            w = words.pop(0)
            if w == "-o":
                words.pop(0)  # the object: -keep's run writes its own
            elif not (drop and w in pinned):
                out.append(w)
        cmd = " ".join(out)
        print("cd %s && %s" % (e["directory"], cmd))
        break
else:
    sys.exit("no compile command for " + f)
EOF
  ) || return 1
  mkdir -p "$3"
  eval "$cmd -keep -keep-dir $3 -o $3/out.o" >"$3/nvcc.log" 2>&1 || { cat "$3/nvcc.log"; return 1; }
  # The PTX proper: no comments, no file names, no tool identification.
  for p in "$3"/*.ptx; do grep -v -e '^//' -e '^\s*\.file' -e '^\s*$' "$p" > "$p.s"; done
  ls "$3"/*.ptx.s >/dev/null 2>&1
}
fail=0
configure "$work/b0" ""
for f in "${files[@]}"; do ptx "$work/b0" "$f" "$work/p0/$(basename "$f")" || exit 1; done
i=0
for s in "${sets[@]:1}"; do
  i=$((i + 1))
  configure "$work/b$i" "$s"
  for f in "${files[@]}"; do
    n=$(basename "$f")
    ptx "$work/b$i" "$f" "$work/p$i/$n" || exit 1
    for a in "$work/p0/$n"/*.ptx.s; do
      b="$work/p$i/$n/$(basename "$a")"
      if cmp -s "$a" "$b"; then
        echo "pinned: $f with CMAKE_CUDA_FLAGS='$s': PTX identical ($(basename "${a%.s}"), $(wc -l <"$a") lines)"
      else
        echo "CHANGED: $f with CMAKE_CUDA_FLAGS='$s': $(basename "${a%.s}") differs:"
        diff "$a" "$b" | grep -E '^[<>]' | head -8
        fail=1
      fi
      # The machine code too (ptxas gets the same options either way).
      ca=$(ls "$work/p0/$n"/*.cubin 2>/dev/null | grep -v dlink | head -1)
      cb="$work/p$i/$n/$(basename "$ca")"
      if [ -n "$ca" ] && ! cmp -s "$ca" "$cb"; then
        echo "CHANGED: $f with CMAKE_CUDA_FLAGS='$s': $(basename "$ca") differs"; fail=1
      elif [ -n "$ca" ]; then echo "pinned: $f with CMAKE_CUDA_FLAGS='$s': cubin identical ($(basename "$ca"))"; fi
      # Belt and braces: nothing approximate or flushed in the arithmetic.
      bad=$(grep -cE '(div|sqrt|rcp)\.(approx|full)|\.ftz\.|ex2\.approx\.f32|lg2\.approx\.f32' "$b" || true)
      base=$(grep -cE '(div|sqrt|rcp)\.(approx|full)|\.ftz\.|ex2\.approx\.f32|lg2\.approx\.f32' "$a" || true)
      [ "$bad" = "$base" ] || { echo "  and $bad approximate/flushing instructions against $base"; fail=1; }
    done
  done
  # The control: without the per-file options the global flags must show.
  ptx "$work/b$i" "${files[1]}" "$work/c$i" drop || exit 1
  a=$(ls "$work/p0/cnn_cuda.cu"/*.ptx.s | head -1)
  if cmp -s "$a" "$work/c$i/$(basename "$a")"; then
    echo "control FAILED: cnn_cuda.cu without its pinned options is unchanged by '$s': the check sees nothing"
    fail=1
  else
    echo "control: cnn_cuda.cu without its pinned options does change under '$s' ($(diff "$a" "$work/c$i/$(basename "$a")" | grep -c '^>') PTX lines differ)"
  fi
done
[ $fail = 0 ] && echo "cuda_ieee_check: fc_cuda.cu and cnn_cuda.cu keep IEEE division, square root, subnormals and no FMA contraction under global flags"
exit $fail
