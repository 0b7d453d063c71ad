# The benchmarks' output checks (sourced by scripts/bench_*.sh): a timing
# counts only for a run whose output is right, so every benchmark compares
# what it computed, byte for byte, and fails (exit 1) where it differs.
# Stores carry a random identity, so they are compared through `ntkd
# export --format raw` of every kernel they hold (hashed, to keep the disk
# use at one export at a time).

# kernels_of BUILD STORE: the kernels STORE holds ("nngp ntk", "ntk", ...)
kernels_of() { "$1/ntkd" info "$2" | sed -n 's/^kernels: *//p' | tr -d ','; }

# export_hash BUILD STORE KERNEL [export options...]: sha256 of the raw export
export_hash() {
  local build=$1 store=$2 kernel=$3 out
  shift 3
  out=$(mktemp "${TMPDIR:-/tmp}/ntkd-bench-export-XXXXXX")
  rm -f "$out"
  if ! "$build/ntkd" export "$store" "$out" --kernel "$kernel" --format raw "$@" >/dev/null 2>"$out.err"; then
    sed 's/^/    /' "$out.err" >&2
    rm -f "$out" "$out.err"
    echo "export failed"
    return 1
  fi
  sha256sum < "$out" | cut -d' ' -f1
  rm -f "$out" "$out.err"
}

# same_stores WHAT BUILD_A STORE_A BUILD_B STORE_B: every kernel of the two
# stores byte for byte the same (each exported by its own build). Prints
# one line; returns 1 where they differ.
same_stores() {
  local what=$1 ba=$2 sa=$3 bb=$4 sb=$5 k ha hb bad=0 ka kb
  ka=$(kernels_of "$ba" "$sa") kb=$(kernels_of "$bb" "$sb")
  if [ -z "$ka" ] || [ "$ka" != "$kb" ]; then
    echo "check FAILED: $what: kernels '$ka' against '$kb'"
    return 1
  fi
  for k in $ka; do
    ha=$(export_hash "$ba" "$sa" "$k") hb=$(export_hash "$bb" "$sb" "$k")
    [ "$ha" = "$hb" ] && [ "$ha" != "export failed" ] || bad=1
  done
  if [ $bad = 0 ]; then echo "check: $what: $ka byte for byte the same"
  else echo "check FAILED: $what: the exports differ ($ka)"; fi
  return $bad
}

# same_block WHAT BUILD STORE SMALL K: the leading K x K block of every
# kernel of STORE byte for byte equal to SMALL, a store of the first K
# samples of the same job (ntkd's values do not depend on the tile size,
# the rank count or the samples after the first K when K is a multiple of
# the FC input covariance's 512-row blocks).
same_block() {
  local what=$1 b=$2 big=$3 small=$4 n=$5 k ha hb bad=0 kk
  kk=$(kernels_of "$b" "$big")
  [ -n "$kk" ] || { echo "check FAILED: $what: no kernels in $big"; return 1; }
  for k in $kk; do
    ha=$(export_hash "$b" "$big" "$k" --rows "0:$n" --cols "0:$n") hb=$(export_hash "$b" "$small" "$k")
    [ "$ha" = "$hb" ] && [ "$ha" != "export failed" ] || bad=1
  done
  if [ $bad = 0 ]; then echo "check: $what: $kk of the first $n samples byte for byte the same"
  else echo "check FAILED: $what: the first $n samples' $kk differ"; fi
  return $bad
}
