#!/usr/bin/env bash
# docs/LIBRARY.md as it stands: `cmake --install` of this build into a
# temporary prefix P, the files it promises (header, libntkd.so.0 with its
# SONAME, libntkd.a, ntkd.pc, bin/ntkd), then every ```sh block of the page
# run in order with that P (its `P=...` lines dropped, `build` this build):
# the ```c example compiled with pkg-config against the installed tree,
# shared and static; the ```ini job run by the installed ntkd. Checks the
# example's output: the NNGP and NTK diagonal against their closed form,
# an exactly symmetric NTK, and the store's block equal to the library's.
# Usage: tests/e2e_install.sh path/to/build
set -u
BUILD=$(readlink -f "${1:?usage: e2e_install.sh path/to/build}")
source "$(dirname "$(readlink -f "$0")")/e2e_lib.sh"
DOC=$SRC/docs/LIBRARY.md

# The page's blocks: FENCE-INFO.N files, N in order of appearance.
awk -v dir="$W" '
  /^```/ && !inside { inside = 1; info = substr($0, 4); n[info]++; out = dir "/block-" info "." n[info]; printf "" > out; next }
  /^```/ && inside { inside = 0; close(out); next }
  inside { print > out }
' "$DOC"
check "docs/LIBRARY.md has its c, ini and sh blocks" test -s block-c.1 -a -s block-ini.1 -a -s block-sh.1
cp block-c.1 example.c
cp block-ini.1 x.conf

# The same OpenBLAS kernels in the example as in the program (docs/LIBRARY.md:
# bit for bit on one machine when both use them).
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  core=$("$BUILD/ntkd" --version | sed -n 's/^OpenBLAS kernels: //p')
  [ -n "$core" ] && export OPENBLAS_CORETYPE=$core
fi

export P=$W/prefix
ln -s "$BUILD" build
blocks=(block-sh.*)
for ((k = 1; k <= ${#blocks[@]}; k++)); do
  b=block-sh.$k
  grep -v '^P=' "$b" > "$b.run"
  # python3: the system one, with numpy (scripts/install-deps.sh), as on a set-up machine.
  if PATH=/usr/bin:$PATH bash -eu "$b.run" > "$b.out" 2>&1; then
    ok "sh block $k of docs/LIBRARY.md: $(head -c 70 "$b.run" | tr '\n' ' ')"
  else
    bad "sh block $k of docs/LIBRARY.md fails:"
    sed 's/^/    /' "$b.run"
    tail -15 "$b.out" | sed 's/^/    | /'
  fi
  # After the install block: the tree it promises.
  if [ $k = 1 ]; then
    for f in include/ntkd.h lib/libntkd.so.0 lib/libntkd.so lib/libntkd.a lib/pkgconfig/ntkd.pc bin/ntkd; do
      check "installed $f" test -e "$P/$f"
    done
    check "libntkd.so.0's SONAME is libntkd.so.0" \
      bash -c "readelf -d '$P/lib/libntkd.so.0' | grep -q 'Library soname: \[libntkd.so.0\]'"
    check "pkg-config's -I and -L are the installed include and lib folders" bash -c "
      out=\$(PKG_CONFIG_PATH='$P/lib/pkgconfig' pkg-config --cflags --libs ntkd) && echo \"    \$out\" &&
      inc=\$(tr ' ' '\\n' <<< \"\$out\" | sed -n 's/^-I//p') && lib=\$(tr ' ' '\\n' <<< \"\$out\" | sed -n 's/^-L//p') &&
      [ \"\$(readlink -f \"\$inc\")\" = '$P/include' ] && [ \"\$(readlink -f \"\$lib\")\" = '$P/lib' ]"
    check "the shared library exports ntkd_* only" bash -c "
      nm -D --defined-only '$P/lib/libntkd.so.0' | awk '{print \$3}' | grep -v '^NTKD_' | grep -v '^ntkd_' | grep . && exit 1 || exit 0"
  fi
done

check "example links libntkd.so.0 from the prefix" bash -c "ldd ./example | grep -q '$P/lib/libntkd.so.0'"
check "example-static does not need libntkd.so" bash -c "! ldd ./example-static | grep -q libntkd"

# The closed form of the example's diagonal, and its other lines.
check_output() {
  $PY - "$1" "$2" <<'PY'
import sys, re
import numpy as np
out, store = open(sys.argv[1]).read(), sys.argv[2]
i, k = np.indices((6, 4))
x = ((i * 7 + k * 3) % 11 - 5) / 4.0
w2, b2 = 1.5 ** 2, 0.1 ** 2
K0 = w2 * (x * x).sum(1) / 4 + b2
K1 = w2 * K0 / 2 + b2
K2 = w2 * K1 / 2 + b2
T1 = K1 + w2 * K0 / 2
T2 = K2 + w2 * T1 / 2
got = {int(m[0]): (float(m[1]), float(m[2])) for m in re.findall(r"^sample (\d+): nngp (\S+) ntk (\S+)$", out, re.M)}
assert sorted(got) == list(range(6)), out
for s in range(6):
    g, t = got[s]
    assert abs(g - K2[s]) <= 1e-14 * K2[s] and abs(t - T2[s]) <= 1e-14 * T2[s], (s, g, K2[s], t, T2[s])
assert re.search(r"^max \|ntk - ntk\^T\| = 0$", out, re.M), out
if store != "-":
    assert re.search(r"^x.ntk: 6 x 6, max \|store - ntk\| = 0$", out, re.M), out
PY
}
check "the last block ran the example on the store" grep -q '^x.ntk: ' "block-sh.${#blocks[@]}.out"
./example x.ntk > shared.out 2>&1
check "example: the diagonal's closed form, a symmetric NTK, the store's block equal (bit for bit)" check_output shared.out x.ntk
./example-static x.ntk > static.out 2>&1
check "example-static prints the same" cmp -s static.out shared.out
./example > plain.out 2>&1
check "example without a store: the same diagonal" check_output plain.out -

echo "e2e_install: $passed passed, $failed failed"
[ "$failed" = 0 ]
