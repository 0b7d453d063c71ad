#!/usr/bin/env bash
# The cg solve method end to end (docs/SOLVE.md, "n beyond memory: conjugate
# gradients"): on a 2 500-sample float32 FC kernel, conjugate gradients with
# the kernel held in memory and streamed from the store, on 1 and 3 ranks,
# with float32 products (the default) and float64 ones, give the Cholesky
# solve's predictions within 1e-6 of their scale; a ridge's classes as one
# block need fewer iterations than one column at a time; a ridge
# that cannot converge (ridge 0 on duplicated samples) is reported and the
# other ridges are still written; a stop signal ends the iterations; a
# rank that stops answering ends the job with exit 9.
# Usage: tests/e2e_cg.sh path/to/ntkd
set -u
NTKD=$(readlink -f "${1:?usage: e2e_cg.sh path/to/ntkd}")
source "$(dirname "$(readlink -f "$0")")/e2e_lib.sh"

# Ten Gaussian clusters in 24 dimensions: 2 500 train and 600 test samples
# (5 000 until issue 26: the same paths, a quarter of the time).
$PY -c "
import numpy as np; r = np.random.default_rng(11)
C = r.standard_normal((10, 24))
def mk(n):
    y = r.integers(0, 10, n); return (C[y] + 1.5 * r.standard_normal((n, 24))).astype(np.float32), y
x, y = mk(2500); np.save('xtr.npy', x); np.save('ytr.npy', y)
x, y = mk(600); np.save('xte.npy', x); np.save('yte.npy', y)
x = np.load('xtr.npy')[:1200].copy(); y = np.load('ytr.npy')[:1200].copy()
x[1] = x[0]; y[1] = (y[0] + 1) % 10; np.save('dup.npy', x); np.save('ydup.npy', y)"

# job NAME DATA LABELS RIDGES [extra [solve] lines]: the same kernel (tile 448:
# tiles straddle the train/test boundary), only the solve settings differ
job() {
  local name=$1 data=$2 labels=$3 ridges=$4; shift 4
  {
    printf '[data]\npath = %s\nlabels = %s\n[test]\npath = xte.npy\nlabels = yte.npy\n' "$data" "$labels"
    printf '[model]\narch = Dense Relu Dense Relu Dense\nw_std = 1.4142135623730951\nb_std = 0.05\nkernel = ntk\n'
    printf '[compute]\nprecision = float32\ntile = 448\n[output]\npath = k.ntk\n'
    printf '[solve]\nridge = %s\npredictions = %s\n' "$ridges" "$name"
    for l in "$@"; do printf '%s\n' "$l"; done
  } > "$name.conf"
}
# close A B [N]: every prediction file of prefix A equals B's within 1e-6 of B's
# scale, B having N files (default 4)
close() {
  $PY -c "
import numpy as np, glob, sys
n = 0
for fb in sorted(glob.glob('$2-*.npy')):
    a = np.load(fb.replace('$2-', '$1-', 1)); b = np.load(fb); n += 1
    e = np.abs(a - b).max() / np.abs(b).max()
    if not e <= 1e-6: sys.exit('%s: %.2e' % (fb, e))
sys.exit(0 if n == ${3:-4} else 'found %d files' % n)"
}

RIDGES="1e-4, 1e-2"
job lapack xtr.npy ytr.npy "$RIDGES" "method = lapack"
expect_rc 0 "the kernel and the Cholesky solve (method = lapack, mpirun -np 3)" mpirun -np 3 "$NTKD" lapack.conf
for P in 1 3; do
  for mode in memory stream; do
    job "cg$mode$P" xtr.npy ytr.npy "$RIDGES" "method = cg" "cg_kernel = $mode"
    expect_rc 0 "cg, kernel in $mode, $P rank(s)" mpirun -np $P "$NTKD" solve k.ntk "cg$mode$P.conf"
    check "... predictions equal the Cholesky solve's within 1e-6" close "cg$mode$P" lapack
    check "... says where the kernel is" has "cg ntk: .* train tiles, .* $([ $mode = memory ] && echo held in memory || echo streamed from the store)" err.log
    check "... prints iterations with a residual" has "cg ntk iteration [0-9]*: residual .* (worst of [0-9]* columns), " err.log
    check "... and the table its iterations" bash -c "grep -Eq '^ntk +0.01 +[^ ]+ +[0-9]+ it ' out.log"
  done
done
# The iterations' products in float64 (cg_products = float64) against the
# default float32 products with true residuals in float64: both give the
# Cholesky solve's predictions; the float32 run says how many true residuals
# it computed.
check "the float32 products computed true residuals in float64" has "cg ntk: [0-9]* true residuals" err.log
check "... in time: no column restarted from a drifted residual" bash -c "! grep -q 'drifted above the tolerance' err.log"
job cgf64 xtr.npy ytr.npy "$RIDGES" "method = cg" "cg_products = float64"
expect_rc 0 "cg, products in float64, 3 ranks" mpirun -np 3 "$NTKD" solve k.ntk cgf64.conf
check "... predictions equal the Cholesky solve's within 1e-6" close cgf64 lapack
check "... and no true residuals were needed" bash -c "! grep -q 'true residuals' err.log"
# A breakdown (D'(K + reg)D not positive definite, which float32 products can
# produce where it is nearly singular) at the 5th iteration, simulated: with
# float32 products the columns
# restart on float64 products and converge; with float64 products it fails.
NTKD_TEST_CG_BREAKDOWN=5 expect_rc 0 "a breakdown on float32 products (simulated): solved" \
  mpirun -x NTKD_TEST_CG_BREAKDOWN -np 3 "$NTKD" solve k.ntk cgmemory3.conf
check "... saying it went on in float64" has "a breakdown on float32 products in 20 columns: float64 products" err.log
check "... saying the test setting aloud (docs/CLI.md)" has "test setting NTKD_TEST_CG_BREAKDOWN=5" err.log
check "... predictions equal the Cholesky solve's within 1e-6" close cgmemory3 lapack
NTKD_TEST_CG_BREAKDOWN=5 expect_rc 2 "the same breakdown on float64 products: the ridges fail" \
  mpirun -x NTKD_TEST_CG_BREAKDOWN -np 3 "$NTKD" solve k.ntk cgf64.conf
check "... as a breakdown" has "conjugate gradients broke down after 5 iterations" err.log
# A float64 kernel: cg_products = float32 is refused at its line, before
# any tile (it was refused after the whole kernel), by `ntkd check` too.
job f64 dup.npy ydup.npy 0.01 "method = cg" "cg_products = float32"
sed -i 's/^path = k.ntk/path = k64.ntk/; s/^precision = float32/precision = float64/' f64.conf
expect_rc 2 "cg_products = float32 on a float64 kernel: refused" mpirun -np 2 "$NTKD" f64.conf
check "... saying why, at its line" \
  has "f64.conf:$(grep -n '^cg_products' f64.conf | cut -d: -f1): \[solve\] cg_products = float32 needs a float32 kernel" err.log
check "... before any tile: no store" [ ! -e k64.ntk ]
expect_rc 2 "... by ntkd check too" "$NTKD" check f64.conf
check "memory and stream give the same predictions bit for bit (1 rank)" \
  bash -c "for f in cgmemory1-*.npy; do cmp -s \$f \${f/cgmemory1/cgstream1} || exit 1; done"
job cgauto3 xtr.npy ytr.npy 1e-3 "method = cg" "preconditioner_rank = 0" "tolerance = 1e-10"
expect_rc 0 "cg without a preconditioner, tolerance 1e-10 (auto: memory)" mpirun -np 3 "$NTKD" solve k.ntk cgauto3.conf
check "... held in memory" has "held in memory" err.log
# A ridge's classes run as one block (docs/SOLVE.md, "n beyond memory:
# conjugate gradients", Blocks): without a
# preconditioner the ten clusters' large eigenvalues are what plain CG
# spends its iterations on, and a block of ten directions takes them at
# once. Against one column at a time (NTKD_TEST_CG_UNBLOCKED=1, plain CG):
# both give Cholesky's predictions, the block in well under 0.7 times the
# iterations (measured 207 against 553 at ridge 1e-4).
job block xtr.npy ytr.npy "$RIDGES" "method = cg" "preconditioner_rank = 0"
expect_rc 0 "cg without a preconditioner, a ridge's classes as one block" mpirun -np 3 "$NTKD" solve k.ntk block.conf
cp out.log block.out
check "... predictions equal the Cholesky solve's within 1e-6" close block lapack
job unblocked xtr.npy ytr.npy "$RIDGES" "method = cg" "preconditioner_rank = 0"
NTKD_TEST_CG_UNBLOCKED=1 expect_rc 0 "the same, one column at a time (NTKD_TEST_CG_UNBLOCKED=1)" \
  mpirun -x NTKD_TEST_CG_UNBLOCKED -np 3 "$NTKD" solve k.ntk unblocked.conf
check "... saying the test setting aloud" has "test setting NTKD_TEST_CG_UNBLOCKED=1" err.log
check "... predictions equal the Cholesky solve's within 1e-6" close unblocked lapack
check "... the block needs under 0.7 times the iterations at ridge 1e-4" bash -c "
b=\$(awk '\$1 == \"nngp\" && \$2 == \"0.0001\" {print \$4}' block.out)
u=\$(awk '\$1 == \"nngp\" && \$2 == \"0.0001\" {print \$4}' out.log)
echo \"block \$b, one column at a time \$u iterations\"; [ -n \"\$b\" ] && [ -n \"\$u\" ] && [ \$((b * 10)) -lt \$((u * 7)) ]"
# The preconditioner (default rank n/4): each ridge's inverse of
# s I + L^T L is held and applied by one rank, the ridges dealt round the
# ranks (4 ridges on 3 ranks: rank 0 holds two). A wrong or missing
# inverse still converges, only slower: so the preconditioned block must
# give Cholesky's predictions at every ridge, and take under half the
# unpreconditioned block's iterations at ridges 1e-4 (rank 0's first
# inverse), 1e-2 (rank 2's) and 1e-3 (rank 1's, against the block at 1e-2,
# which needs fewer than at 1e-3) (measured 33 against 207, 26 against 156, 32).
job pre xtr.npy ytr.npy "1e-4, 1e-3, 1e-2, 1e-1" "method = cg"
expect_rc 0 "cg with the default preconditioner, 4 ridges on 3 ranks" mpirun -np 3 "$NTKD" solve k.ntk pre.conf
cp out.log pre.out
job lapack4 xtr.npy ytr.npy "1e-4, 1e-3, 1e-2, 1e-1" "method = lapack"
"$NTKD" solve k.ntk lapack4.conf > /dev/null 2>&1
check "... predictions of all 4 ridges equal the Cholesky solve's within 1e-6" close pre lapack4 8
for pair in 0.0001:0.0001 0.01:0.01 0.001:0.01; do
  check "... under half the unpreconditioned block's iterations (ridges ${pair%:*}, ${pair#*:})" bash -c "
p=\$(awk '\$1 == \"nngp\" && \$2 == \"${pair%:*}\" {print \$4}' pre.out)
b=\$(awk '\$1 == \"nngp\" && \$2 == \"${pair#*:}\" {print \$4}' block.out)
echo \"preconditioned \$p, block without \$b iterations\"; [ -n \"\$p\" ] && [ -n \"\$b\" ] && [ \$((p * 2)) -lt \$b ]"
done
# 40 classes: a ridge's classes run in blocks of at most 32 (32 and 8 here),
# and 9 train samples, fewer than a block's columns: the block keeps the
# directions that are independent. Both as Cholesky solves them.
$PY -c "
import numpy as np; r = np.random.default_rng(5)
np.save('y40.npy', r.integers(0, 40, 2500)); np.save('y40t.npy', r.integers(0, 40, 600))
x = np.load('xtr.npy'); np.save('x9.npy', x[:9]); np.save('y9.npy', np.arange(9))"
for m in cg lapack; do
  job "c40$m" xtr.npy y40.npy "1e-3, 1e-1" "method = $m"
  sed -i 's/^labels = yte.npy/labels = y40t.npy/' "c40$m.conf"
  job "n9$m" x9.npy y9.npy "1e-3, 1e-1" "method = $m"
  sed -i 's/^path = k.ntk/path = n9.ntk/' "n9$m.conf"
done
expect_rc 0 "40 classes, cg (blocks of 32 and 8 per ridge)" mpirun -np 3 "$NTKD" solve k.ntk c40cg.conf
"$NTKD" solve k.ntk c40lapack.conf > /dev/null 2>&1
check "... the same predictions as Cholesky" close c40cg c40lapack
expect_rc 0 "9 train samples, 9 classes, cg" mpirun -np 2 "$NTKD" n9cg.conf
"$NTKD" solve n9.ntk n9lapack.conf > /dev/null 2>&1
check "... the same predictions as Cholesky" close n9cg n9lapack
job lapack1 xtr.npy ytr.npy 1e-3 "method = lapack"
"$NTKD" solve k.ntk lapack1.conf > /dev/null 2>&1
check "... the same predictions as Cholesky" bash -c "$PY -c \"
import numpy as np
for k in ('nngp', 'ntk'):
    a = np.load('cgauto3-%s-ridge0.001.npy' % k); b = np.load('lapack1-%s-ridge0.001.npy' % k)
    assert np.abs(a - b).max() <= 1e-6 * np.abs(b).max()\""

# A small float32 kernel (n = 40 <= 100: the default preconditioner has
# rank n, nearly K + reg itself): the first step lands within float32
# rounding, the true residual that replaces the recurrence's is then nearly
# a multiple of b, and a step of r'z / p'(K + reg)p was 1e10 times too long
# (every ridge failed, exit 2). Now solved, as Cholesky solves it.
$PY -c "
import numpy as np; r = np.random.default_rng(3)
np.save('sx.npy', r.standard_normal((40, 8))); np.save('sy.npy', r.integers(0, 3, 40))
np.save('sxt.npy', r.standard_normal((10, 8))); np.save('syt.npy', r.integers(0, 3, 10))"
for m in cg lapack; do
  job "small$m" sx.npy sy.npy "1e-3, 0.1" "method = $m"
  sed -i 's/^path = k.ntk/path = small.ntk/; s/^path = xte.npy/path = sxt.npy/; s/^labels = yte.npy/labels = syt.npy/; s/^tile = 448/tile = 16/' "small$m.conf"
done
expect_rc 0 "a 40-sample float32 kernel, cg with the default (full-rank) preconditioner" "$NTKD" smallcg.conf
check "... no breakdown, no ridge failed" bash -c "! grep -q 'breakdown\\|failed' err.log out.log"
"$NTKD" solve small.ntk smalllapack.conf > /dev/null 2>&1
check "... the same predictions as Cholesky" close smallcg smalllapack

# Tiny ridges with that full-rank preconditioner (float64): its shift was
# the ridge alone, and applied as (R - L (s I + G)^-1 L^T R) / s it was
# rounding noise times 1e284 at s = 1e-300 ("breakdown ... not positive
# definite") and 2 000 iterations at 1e-20, on a kernel Cholesky solves
# (rcond 7.5e-5). The shift now has a floor: solved as Cholesky solves them.
for m in cg lapack; do
  job "tiny$m" sx.npy sy.npy "0, 1e-300, 1e-20" "method = $m"
  sed -i 's/^path = k.ntk/path = tiny.ntk/; s/^path = xte.npy/path = sxt.npy/; s/^labels = yte.npy/labels = syt.npy/; s/^tile = 448/tile = 16/; s/^precision = float32/precision = float64/' "tiny$m.conf"
done
expect_rc 0 "ridges 0, 1e-300 and 1e-20 on a 40-sample float64 kernel, cg with the full-rank preconditioner" "$NTKD" tinycg.conf
"$NTKD" solve tiny.ntk tinylapack.conf > /dev/null 2>&1
check "... the same predictions as Cholesky, every ridge and kernel" close tinycg tinylapack 6

# Ridge 0 on two identical samples with different labels: K alpha = Y has no
# solution. Reported, not looped; the other ridge is solved and written.
job dupsolve dup.npy ydup.npy "0, 0.01" "method = cg" "max_iterations = 400"
sed -i 's/^path = k.ntk/path = dup.ntk/' dupsolve.conf
expect_rc 2 "ridge 0 on duplicated samples: not converged, exit 2" mpirun -np 3 "$NTKD" dupsolve.conf
check "... the message gives the residual reached and what to do" \
  bash -c "grep 'ridge 0 .*conjugate gradients' err.log | grep 'relative residual of [0-9.e+-]*' | grep '[0-9] iterations' | grep -q 'increase the ridge'"
check "... the table says failed" bash -c "grep -Eq '^ntk +0 .*failed' out.log"
check "... no predictions for ridge 0" bash -c "! ls dupsolve-*-ridge0.npy 2>/dev/null"
check "... but ridge 0.01 is written, for both kernels" bash -c "[ -s dupsolve-ntk-ridge0.01.npy ] && [ -s dupsolve-nngp-ridge0.01.npy ]"

# Ridge 1e-10 on ten duplicated samples (float64): Cholesky solves it (rcond
# 3e-11), but the residual float64 can reach is about eps x cond, far above
# 1e-8: the recurrence converges in a few iterations and the true residual
# stays above the tolerance through the restarts. Said as such, not as a
# max_iterations reached after a handful of iterations.
$PY -c "
import numpy as np; x = np.load('sx.npy'); y = np.load('sy.npy')
np.save('sdx.npy', np.vstack([x, x[:10]])); np.save('sdy.npy', np.concatenate([y, (y[:10] + 1) % 3]))"
job drift sdx.npy sdy.npy 1e-10 "method = cg"
sed -i 's/^path = k.ntk/path = drift.ntk/; s/^path = xte.npy/path = sxt.npy/; s/^labels = yte.npy/labels = syt.npy/; s/^tile = 448/tile = 16/; s/^precision = float32/precision = float64/' drift.conf
expect_rc 2 "ridge 1e-10 on duplicated samples: the true residual stays above the tolerance, exit 2" "$NTKD" drift.conf
check "... the message says so and what helps, not max_iterations" \
  bash -c "grep -q 'but the true residual stayed at .*increase the ridge or \[solve\] tolerance' err.log && ! grep -q max_iterations err.log"

# A stop signal during the iterations: exit 5 on every rank, no hang.
job stop xtr.npy ytr.npy 1e-4 "method = cg" "preconditioner_rank = 0" "tolerance = 1e-15" "max_iterations = 100000"
mpirun -np 3 "$NTKD" stop.conf > /dev/null 2> stop.log &
mp=$!
# Sent once the iterations have begun (an event: their first line), however
# long the kernel takes on this machine; a job that ends first fails below.
while kill -0 $mp 2>/dev/null && ! grep -q "cg nngp iteration" stop.log; do sleep 0.1; done
kill -TERM $(rank_pids "ntkd stop.conf")
wait $mp
check "SIGTERM during the iterations: exit 5" [ $? = 5 ]
check "... saying it was interrupted" has "interrupted during the solve (the store is complete): mpirun ntkd solve k.ntk JOB.conf solves again" stop.log

# A rank that stops answering during the iterations (SIGSTOP): the others
# wait at most [compute] worker_timeout (10 s here; at least 3x the longest
# stretch between two steps) and end the job, exit 9, saying so. They once
# waited for ever in the product's allreduce.
job stall xtr.npy ytr.npy 1e-4 "method = cg" "preconditioner_rank = 0" "tolerance = 1e-15" "max_iterations = 100000"
sed -i 's/^tile = 448/tile = 448\nworker_timeout = 10/' stall.conf
: > stall.log
mpirun -np 3 "$NTKD" stall.conf > /dev/null 2> stall.log &
mp=$!
while kill -0 $mp 2>/dev/null && ! grep -q "cg nngp iteration" stall.log; do sleep 0.1; done
stall_rank "ntkd stall.conf" 2 $mp
check "a SIGSTOPped rank during the iterations: exit 9, not the guard's kill (exit $rc)" [ "$rc" = 9 ]
check "... a waiting rank says how long it waited and that the store is complete" \
  grep -q "ntkd: rank [01]: the [a-z]* waited [0-9.]* s for the other ranks: one of them stopped answering, in the cg solve of nngp (limit [0-9.]* s: \\[compute\\] worker_timeout.*the store is complete: mpirun ntkd solve k.ntk JOB.conf solves again" stall.log
sleep 1
check "... no rank left running" [ -z "$(rank_pids "ntkd stall.conf")" ]

# A rank that stops answering between the kernels (SIGSTOP as the NNGP's
# iterations end: while rank 0 writes its files, or as the NTK's solve
# sets up): the driver's meetings of the ranks and the cg's node exchanges
# are timed too, exit 9. The ranks waited for ever in their untimed
# collectives (found by an adversarial pass).
job stall2 xtr.npy ytr.npy 1e-4 "method = cg"
sed -i 's/^tile = 448/tile = 448\nworker_timeout = 10/' stall2.conf
: > stall2.log
mpirun -np 3 "$NTKD" stall2.conf > /dev/null 2> stall2.log &
mp=$!
while kill -0 $mp 2>/dev/null && ! grep -q "cg nngp: .* iterations (products)" stall2.log; do sleep 0.01; done
stall_rank "ntkd stall2.conf" 2 $mp
check "a rank SIGSTOPped as the NNGP's solve ends: exit 9, not the guard's kill (exit $rc)" [ "$rc" = 9 ]
check "... a waiting rank says that the store is complete" grep -q "stopped answering.*the store is complete" stall2.log
sleep 1
check "... no rank left running" [ -z "$(rank_pids "ntkd stall2.conf")" ]

# The same, deterministic: rank 0 held stopped (tests/preload.c) as it
# creates the NNGP's first predictions file, the other ranks waiting for
# it in the driver's meeting after the files.
PRELOAD=$W/preload.so
mpicc -shared -fPIC -O1 -o "$PRELOAD" "$SRC/tests/preload.c" -ldl 2>preload.err ||
  bad "tests/preload.c does not build: $(head -3 preload.err)"
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0
sed 's/^predictions = stall2$/predictions = stall3/' stall2.conf > stall3.conf
: > stall3.log
mpirun -np 3 -x LD_PRELOAD="$PRELOAD" -x STOPAT=open_prefix -x STOPAT_PATH=stall3-nngp-ridge0.0001.npy.tmp. \
  -x STOPAT_SIGNAL=19 -x STOPAT_MARK=st3.mark "$NTKD" stall3.conf > /dev/null 2> stall3.log &
mp=$!
(sleep 120; kill -KILL $mp) >/dev/null 2>&1 &
guard=$!
wait $mp
rc=$?
kill $guard 2>/dev/null
kill -CONT $(rank_pids "ntkd stall3.conf") 2>/dev/null
check "rank 0 stopped as it writes the NNGP's predictions (held there): exit 9, not the guard's kill (exit $rc)" \
  bash -c "[ -e st3.mark ] && [ $rc = 9 ]"
check "... a waiting rank says so" grep -q "ntkd: rank [12]: .*stopped answering, in the solve of k.ntk" stall3.log
sleep 1
check "... no rank left running" [ -z "$(rank_pids "ntkd stall3.conf")" ]

echo "e2e_cg: $passed passed, $failed failed"
[ "$failed" = 0 ]
