#!/usr/bin/env bash
# Fuzz the parsers and readers with libFuzzer (clang): the job file, the
# architecture strings, the .npy / IDX / CIFAR-10 / labels readers and the
# store reader, each for SECONDS seconds, with ASan and UBSan. Seeds are
# made here from the repository's configs and small generated files.
# Prints executions per target; exits 1 if any target crashed (the
# reproducer is kept in fuzz-out/).
#   scripts/fuzz.sh [SECONDS]      (CI runs it for a few seconds per target)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
# libFuzzer reads a -max_total_time that is not a number as 0: no limit.
[[ "$secs" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: SECONDS must be a whole number of seconds >= 1, not '$secs' (usage: scripts/fuzz.sh [SECONDS])" >&2; exit 2; }
out=fuzz-out
mkdir -p "$out"
CC=${CC_FUZZ:-clang}
command -v "$CC" >/dev/null || { echo "fuzz: $CC not found (Debian: clang, libclang-rt-14-dev)"; exit 1; }
flags="-g -O1 -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -DNTKD_VERSION=\"fuzz\" -Iinclude -Isrc
       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
libs="$(pkg-config --libs libzstd libxxhash zlib) -lm -lpthread"
core="src/base/status.c src/base/signals.c src/base/clock.c src/base/fsutil.c src/job/config.c src/kernels/arch.c src/kernels/layers.c src/kernels/numerical.c src/job/data.c src/base/npy.c src/base/tiling.c src/base/codec.c src/store/store.c src/store/index.c src/store/lock.c"
for t in config arch data store; do
  # shellcheck disable=SC2086
  $CC $flags tests/fuzz/fuzz_$t.c $core $libs -o "$out/fuzz_$t"
done

# Seeds.
seed=$out/seeds
rm -rf "$seed" && mkdir -p "$seed"/{config,arch,data,store}
cp configs/*.conf "$seed/config/"
i=0
for a in "Dense Relu Dense" "[Conv(3, 1, SAME) Relu]*20 GlobalAvgPool Dense" "Conv(3, 2, VALID, W_std=1.5) Erf AvgPool(2) Flatten Dense(b_std=0.1)" "LeakyRelu(0.1)" "[[Dense Abs]*2 Identity]*3" "Dense ElementwiseNumerical(jnp.tanh, deg=25) Dense"; do
  printf '%s' "$a" > "$seed/arch/$i"; i=$((i + 1))
done
/usr/bin/python3 - "$seed/data" <<'PY'
import sys, gzip, struct, numpy as np
d = sys.argv[1]
def npy(name, fmt, a):
    import io
    b = io.BytesIO(); np.save(b, a); open(f'{d}/{name}', 'wb').write(bytes([fmt]) + b.getvalue())
npy('f4', 0, np.arange(12, dtype=np.float32).reshape(3, 4))
npy('u1img', 0 | 4, np.arange(48, dtype=np.uint8).reshape(2, 3, 2, 4))
npy('lab', 0, np.array([1, 2, 3], dtype=np.int64))
idx = struct.pack('>BBBBIII', 0, 0, 8, 3, 3, 2, 2) + bytes(range(12))
open(f'{d}/idx', 'wb').write(bytes([1]) + idx)
open(f'{d}/idxgz', 'wb').write(bytes([1]) + gzip.compress(idx))
open(f'{d}/lab1', 'wb').write(bytes([1]) + struct.pack('>BBBBI', 0, 0, 8, 1, 3) + bytes([0, 1, 2]))
open(f'{d}/cifar', 'wb').write(bytes([2]) + bytes([3]) + bytes(3072) + bytes([7]) + bytes(range(256)) * 12)
PY
if [ -x build/ntkd ]; then
  (cd "$seed/store" &&
   /usr/bin/python3 -c "import numpy as np; np.save('x.npy', np.random.default_rng(0).standard_normal((9, 3)).astype(np.float32))" &&
   printf '[data]\npath = x.npy\n[model]\narch = Dense Relu Dense\n[compute]\ntile = 4\n[output]\npath = s.ntk\n' > j.conf &&
   ../../../build/ntkd j.conf >/dev/null 2>&1 && rm -f x.npy j.conf)
fi

status=0
for t in config arch data store; do
  mkdir -p "$out/corpus_$t"
  if "$out/fuzz_$t" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=4096 -artifact_prefix="$out/crash_$t-" \
       -print_final_stats=1 "$out/corpus_$t" "$seed/$t" > "$out/log_$t" 2>&1; then
    echo "fuzz $t: $(sed -n 's/^stat::number_of_executed_units: *//p' "$out/log_$t") executions, no crash"
  else
    echo "fuzz $t: CRASH, see $out/log_$t and $out/crash_$t-*"
    grep -m5 -E "ERROR|runtime error|SUMMARY" "$out/log_$t" || true
    status=1
  fi
done
exit $status
