# Shared by the end-to-end test scripts (sourced): a scratch folder, Open
# MPI settings, and the pass/fail bookkeeping that ends in the plain
# "N passed, N failed" line.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
PY=/usr/bin/python3
W=$(mktemp -d "${TMPDIR:-/tmp}/ntkd-e2e-XXXXXX")
trap 'rm -rf "$W"' EXIT
cd "$W" || exit 1
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok: $*"; }
bad() { failed=$((failed + 1)); echo "FAILED: $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
# expect_rc CODE WHAT CMD...: run CMD, compare its exit code
expect_rc() {
  local want=$1 what=$2; shift 2
  "$@" >out.log 2>err.log
  local rc=$?
  if [ "$rc" = "$want" ]; then ok "$what (exit $rc)"; else bad "$what: exit $rc, wanted $want"; sed 's/^/    /' err.log | tail -5; fi
}
has() { grep -q -- "$1" "$2"; }
