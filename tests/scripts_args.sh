#!/usr/bin/env bash
# The scripts' arguments (scripts/args.sh): --help prints the usage and
# exits 0; an unknown option, or more arguments than a script takes, is
# refused with exit 2 before it does anything (it had been taken for a
# build folder, or ignored).
#   tests/scripts_args.sh SOURCE_DIR
set -u
src=${1:?usage: scripts_args.sh SOURCE_DIR}
fails=0
check() { # WHAT EXPECTED_RC PATTERN SCRIPT ARGS...
  local what=$1 want=$2 pat=$3 out rc
  shift 3
  out=$(cd "$src" && timeout 20 bash "$@" 2>&1 < /dev/null)
  rc=$?
  if [ "$rc" = "$want" ] && grep -q -- "$pat" <<< "$out"; then
    echo "ok: $what (exit $rc)"
  else
    echo "FAILED: $what: exit $rc (want $want), output: $(head -c 300 <<< "$out")"
    fails=$((fails + 1))
  fi
}
# script, the most arguments it takes
for s in bench_ab.sh:3 bench_cnn.sh:2 bench_fc.sh:5 bench_numerical.sh:2 bench_resume.sh:2 bench_train.sh:3 \
         mem_cnn.sh:2 install-deps.sh:0 quickstart.sh:0; do
  name=${s%%:*} max=${s##*:}
  check "$name --help prints its usage" 0 "$(sed -n 2p "$src/scripts/$name" | cut -c3-20)" "scripts/$name" --help
  check "$name --frobnicate refused, naming it" 2 "$name: unknown option '--frobnicate'" "scripts/$name" --frobnicate
  extra=()
  for ((i = 0; i <= max; i++)); do extra+=(/nonexistent); done
  check "$name with $((max + 1)) arguments refused" 2 "takes at most $max argument(s), got $((max + 1))" \
    "scripts/$name" "${extra[@]}"
done
for s in bench_pss.sh bench_solve.sh; do
  check "$s --help prints its usage" 0 "$(sed -n 2p "$src/scripts/$s" | cut -c3-20)" "scripts/$s" --help
  check "$s --frobnicate refused, naming it" 2 "$s: unknown option '--frobnicate'" "scripts/$s" --frobnicate
done
[ "$fails" = 0 ] || { echo "$fails failed"; exit 1; }
