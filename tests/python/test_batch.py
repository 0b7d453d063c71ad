"""ntkd.batch: kernel_fn computed by the ntkd program into a store (one process and under
mpirun), resumed by a rerun, refusing another job's store, stopped by Ctrl-C, its progress
bar, its errors; and ntkd.store, the same module as ntkd_store."""

import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import ntkd
import ntkd_store
from ntkd import stax
from conftest import inprocess_blas_core, last_to_compute, program_blas_core

N1, N2, TILE = 29, 11, 7  # ragged tiles, cut through the train/test boundary


def kernel_fn(parameterization="ntk"):
    return stax.serial(stax.Dense(64, W_std=1.5, b_std=0.1, parameterization=parameterization), stax.Relu(),
                       stax.Dense(64, W_std=1.2, b_std=0.05, parameterization=parameterization), stax.Erf(),
                       stax.Dense(1, parameterization=parameterization))[2]


def slow_kernel_fn():
    """About 20 s of tiles for 1200 samples on one core: long enough to be stopped."""
    return stax.serial(stax.repeat(stax.serial(stax.Dense(8), stax.Relu()), 1000), stax.Dense(1))[2]


@pytest.fixture(scope="module")
def data(rng):
    return rng.standard_normal((N1, 6)), rng.standard_normal((N2, 6))


def files(folder):
    return {f: open(os.path.join(folder, f), "rb").read() for f in sorted(os.listdir(folder))
            if not f.endswith((".log", ".lock"))}


def test_store_is_ntkd_store(tmp_path, data):
    import ntkd.store
    from ntkd.store import open as store_open
    assert ntkd.store is ntkd_store and store_open is ntkd_store.open
    S = ntkd.batch(kernel_fn(), data[0], store=tmp_path / "k.ntk", progress=False)
    assert isinstance(S, ntkd.store.Store) and S.complete and S.shape == (N1, N1)


def test_a_closed_store_says_so(tmp_path, data):
    """A Kernel kept past its store's with-block, and the closed store itself: every read names
    the store and says it is closed (it was a bare TypeError about 'NoneType')."""
    ntkd.batch(kernel_fn(), data[0], store=tmp_path / "k.ntk", progress=False).close()
    with ntkd_store.open(tmp_path / "k.ntk") as S:
        K = S["ntk"]
        first = np.array(K[:3, :3])
    for read in (lambda: K[:3, :3], lambda: K.matvec(np.ones(N1)), S.verify, lambda: list(S.tiles("ntk"))):
        with pytest.raises(ValueError, match=r"k\.ntk is closed"):
            read()
    with ntkd_store.open(tmp_path / "k.ntk") as S:  # open again: the same numbers
        assert np.array_equal(S["ntk"][:3, :3], first)


def test_a_closed_store_reads_nothing(tmp_path, data):
    """Blocks that need no tile (an empty slice, a test x test block never computed) came back
    after close (NaN, empty) where every other read raised."""
    ntkd.batch(kernel_fn(), data[0], data[1], store=tmp_path / "k.ntk", tile=TILE, progress=False).close()
    with ntkd_store.open(tmp_path / "k.ntk") as S:
        K = S["ntk"]
        assert np.isnan(K[N1 + TILE:, N1 + TILE:]).all()
    for read in (lambda: K[N1 + TILE:, N1 + TILE:], lambda: K[3:3, :]):
        with pytest.raises(ValueError, match=r"k\.ntk is closed"):
            read()


def test_threads_read_the_same_numbers(tmp_path, data):
    """Eight threads reading one intact store, through one handle and a handle each: one zstd
    decompressor shared by every handle gave "not a zstd frame" errors, a crash, and blocks of
    wrong values without an error."""
    import concurrent.futures
    rng = np.random.default_rng(5)
    x = rng.standard_normal((160, 6))
    ntkd.batch(kernel_fn(), x, store=tmp_path / "t.ntk", tile=8, precision="float64", progress=False).close()
    with ntkd_store.open(tmp_path / "t.ntk") as S:
        want = np.array(S["ntk"][:, :])

    def read(S):
        return all(np.array_equal(S["ntk"][:, :], want) for _ in range(6))

    with ntkd_store.open(tmp_path / "t.ntk") as shared:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            assert all(pool.map(read, [shared] * 8))
            own = [ntkd_store.open(tmp_path / "t.ntk") for _ in range(8)]
            assert all(pool.map(read, own))
            for h in own:
                h.close()


def test_a_handle_is_not_copied(tmp_path, data):
    """A pickled or copied handle carried the open file descriptor and closed it when collected:
    the original then read whatever file took that number."""
    import copy
    import pickle
    ntkd.batch(kernel_fn(), data[0], store=tmp_path / "k.ntk", progress=False).close()
    with ntkd_store.open(tmp_path / "k.ntk") as S:
        for f in (pickle.dumps, copy.copy, copy.deepcopy):
            with pytest.raises(TypeError, match="cannot be pickled or copied: pass its path"):
                f(S)
        assert S.verify().intact


def test_the_index_beside_the_file_the_name_reaches(tmp_path, data):
    """Through a symbolic link, and after os.chdir, the index was looked for beside the name
    given: a damaged index (ntkd verify: exit 4) went unseen, and a relative name read another
    folder's index."""
    ntkd.batch(kernel_fn(), data[0], store=tmp_path / "real.ntk", progress=False).close()
    idx = tmp_path / "real.ntk.index"
    b = bytearray(idx.read_bytes())
    b[70] ^= 0xFF
    idx.write_bytes(bytes(b))
    (tmp_path / "link.ntk").symlink_to("real.ntk")
    with ntkd_store.open(tmp_path / "link.ntk") as S:
        assert S.damaged and S.index_problem and S.verify(raise_on_damage=False).damaged_store
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "real.ntk.index").write_bytes(b"not an index")
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        with ntkd_store.open("real.ntk") as S:
            os.chdir("other")
            r = S.verify(raise_on_damage=False)  # real.ntk's own index, damaged
            assert r.damaged_store and "real.ntk.index fails its checksum" in str(r.problems), r.problems
    finally:
        os.chdir(here)


def test_no_descriptor_for_the_index_is_an_error(tmp_path, data):
    """With no file descriptor left for the index, the store was read without it: a damaged
    index passed (ntkd: an I/O error)."""
    ntkd.batch(kernel_fn(), data[0], store=tmp_path / "k.ntk", progress=False).close()
    code = textwrap.dedent(f"""
        import errno, os, resource, sys
        import ntkd_store
        fds = []
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        try:
            while True:
                fds.append(os.open("/dev/null", os.O_RDONLY))
        except OSError:
            pass
        os.close(fds.pop())  # one left: the store's own
        try:
            ntkd_store.open({str(tmp_path / "k.ntk")!r})
        except OSError as e:
            sys.exit(0 if e.errno == errno.EMFILE and "k.ntk.index" in str(e) else 1)
        sys.exit(2)
        """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, (r.returncode, r.stderr[-500:])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("split", [False, True])
def test_blocks_equal_kernel_fn_bit_for_bit(tmp_path, data, dtype, split):
    # kernel_fn runs libntkd in this process; the store's tiles come from the ntkd program.
    # libntkd, when loaded, switches OpenBLAS to the program's kernels (include/ntkd.h).
    core = program_blas_core()
    assert (inprocess_blas_core() or "").lower() == (core or "").lower(), (core, inprocess_blas_core())
    x1, x2 = (a.astype(dtype) for a in data)
    param = "standard" if split else "ntk"
    kf = kernel_fn(param)
    S = ntkd.batch(kf, x1, x2 if split else None, store=tmp_path / "k.ntk", tile=TILE, test_test=split,
                   progress=False)
    assert S.dtype == dtype and S.kernels == ("nngp", "ntk") and S.complete
    job = open(tmp_path / "k.conf").read()
    assert f"arch = {kf.arch}" in job and f"precision = {np.dtype(dtype).name}" in job
    assert ("parameterization = standard" in job) == (param == "standard")
    # The store holds the kernel of x1 (then x2) as one sample set: kernel_fn of that set.
    x = x1 if not split else np.concatenate([x1, x2])
    k = kf(x)
    for g in ("nngp", "ntk"):
        assert np.array_equal(S[g][:, :], getattr(k, g)), g
    if split:
        assert S.n_train == N1 and S.test_test
        assert np.load(tmp_path / "k.x2.npy").dtype == dtype
        # kernel_fn(x2, x1) is the test x train block (libntkd's cross path: rounding apart).
        k21 = kf(x2, x1)
        for g in ("nngp", "ntk"):
            np.testing.assert_allclose(S[g][N1:, :N1], getattr(k21, g), rtol=1e-12 if dtype == np.float64 else 1e-5)


def test_rerun_resumes(tmp_path, data):
    x1, x2 = data
    S = ntkd.batch(kernel_fn(), x1, x2, store=tmp_path / "k.ntk", tile=TILE, progress=False)
    todo, total = last_to_compute(tmp_path / "k.log")
    assert todo == total == S.tiles_needed
    want = S["ntk"][:, :]
    before = files(tmp_path)
    first_run = len(open(tmp_path / "k.log").read())
    S2 = ntkd.batch(kernel_fn(), x1, x2, store=tmp_path / "k.ntk", tile=TILE, progress=False)
    assert last_to_compute(tmp_path / "k.log") == (0, total)
    # The resume ran the job file beside the store, k.conf, the one a user reruns by hand:
    # its lines name it, and no temporary job file.
    rerun = open(tmp_path / "k.log").read()[first_run:]
    assert re.search(r"^ntkd: k\.conf: %d samples" % (N1 + N2), rerun, re.M), rerun
    assert ".new" not in rerun, rerun
    assert np.array_equal(S2["ntk"][:, :], want, equal_nan=True)  # test x test: NaN, not computed
    after = files(tmp_path)
    assert after.keys() == before.keys()
    assert all(after[f] == before[f] for f in after if not f.endswith((".ntk", ".index")))


def test_a_changed_job_accepted_for_the_store_takes_the_files(tmp_path, data):
    # A job that differs from k.conf (here: progress lines) but that the program accepts for
    # the store runs under temporary names, as the log says, and then owns k.conf.
    x1, x2 = data
    ntkd.batch(kernel_fn(), x1, x2, store=tmp_path / "k.ntk", tile=TILE, progress=False)
    assert "progress = 1" not in open(tmp_path / "k.conf").read()
    first_run = len(open(tmp_path / "k.log").read())
    seen = []
    ntkd.batch(kernel_fn(), x1, x2, store=tmp_path / "k.ntk", tile=TILE, progress=lambda d, t: seen.append(d))
    rerun = open(tmp_path / "k.log").read()[first_run:]
    m = re.search(r"^ntkd\.batch: k\.ntk exists and k\.conf differs from this job: the job runs as (k\.conf\.new\d+)",
                  rerun, re.M)
    assert m and re.search(r"^ntkd: %s: " % re.escape(m.group(1)), rerun, re.M), rerun
    assert last_to_compute(tmp_path / "k.log")[0] == 0
    assert "progress = 1" in open(tmp_path / "k.conf").read()
    assert not [f for f in os.listdir(tmp_path) if ".new" in f]


def test_another_jobs_store_raises_unless_overwrite(tmp_path, data):
    x1, x2 = data
    ntkd.batch(kernel_fn(), x1, x2, store=tmp_path / "k.ntk", tile=TILE, progress=False)
    before = files(tmp_path)
    other = stax.serial(stax.Dense(8), stax.Gelu(), stax.Dense(1))[2]
    with pytest.raises(ValueError, match="computed for another job") as e:
        ntkd.batch(other, x1[:20], store=tmp_path / "k.ntk", tile=TILE, progress=False)
    assert isinstance(e.value, ntkd.NtkdError)
    # in the caller's words: the program's --overwrite and [output] path, and the temporary
    # names of the staged job (k.x1.npy.new8244), were in the message
    assert "pass overwrite=True to replace it, or another store" in str(e.value), str(e.value)
    assert "--overwrite" not in str(e.value) and ".new" not in str(e.value), str(e.value)
    assert files(tmp_path) == before, "a refused job changed the store or the files beside it"
    S = ntkd.batch(other, x1[:20], store=tmp_path / "k.ntk", tile=TILE, progress=False, overwrite=True)
    assert S.shape == (20, 20) and np.array_equal(S["ntk"][:, :], other(x1[:20]).ntk)
    assert not os.path.exists(tmp_path / "k.x2.npy"), "the test set of the job before was left beside the store"
    assert np.array_equal(np.load(tmp_path / "k.x1.npy"), x1[:20])


def test_a_new_store_never_returns_another_calls_data(tmp_path, data, monkeypatch):
    # Two calls on one new store at once, with other data: the second writes its data under
    # the final name (k.x1.npy) while the first's program starts, and then finds the store in
    # use. The first must not return a store of the other call's data as its own: it raises.
    x1 = data[0]
    other = x1[::-1].copy()
    real_run = ntkd._program.run

    def racing_run(args, cwd, **kw):
        np.save(os.path.join(cwd, "k.x1.npy"), other)  # the other call, a moment later
        return real_run(args, cwd, **kw)

    monkeypatch.setattr(ntkd._program, "run", racing_run)
    with pytest.raises(ntkd.errors.StoreError, match="replaced while the program ran"):
        S = ntkd.batch(kernel_fn(), x1, store=tmp_path / "k.ntk", tile=TILE, progress=False)
        assert np.array_equal(S["ntk"][:, :], kernel_fn()(x1).ntk), "the store holds the other call's data"
    monkeypatch.setattr(ntkd._program, "run", real_run)
    S = ntkd.batch(kernel_fn(), x1, store=tmp_path / "k.ntk", tile=TILE, progress=False, overwrite=True)
    assert np.array_equal(S["ntk"][:, :], kernel_fn()(x1).ntk)
    # Undisturbed, a new store is returned as before.
    S = ntkd.batch(kernel_fn(), x1, store=tmp_path / "k2.ntk", tile=TILE, progress=False)
    assert np.array_equal(S["ntk"][:, :], kernel_fn()(x1).ntk)


def test_a_new_store_never_returns_data_replaced_between_its_writes(tmp_path, data, monkeypatch):
    # The other call's k.x1.npy lands after this call wrote its own and before it wrote
    # k.x2.npy (a large x2, a slow file system): the program then reads the other call's x1.
    # Seen returning that store as this call's when the files were judged after all writes.
    x1, x2 = data
    other = x1[::-1].copy()
    real_write = ntkd._batch._write

    def racing_write(path, content):
        mine = real_write(path, content)
        if os.path.basename(path) == "k.x1.npy":
            real_write(path, other)  # the other call, a moment later
        return mine

    monkeypatch.setattr(ntkd._batch, "_write", racing_write)
    with pytest.raises(ntkd.errors.StoreError, match="replaced while the program ran"):
        S = ntkd.batch(kernel_fn(), x1, x2, store=tmp_path / "k.ntk", tile=TILE, progress=False)
        assert np.array_equal(S["ntk"][:, :], kernel_fn()(np.concatenate([x1, x2])).ntk), "another call's data"
    monkeypatch.undo()
    # The other call's file lands the moment this call's is renamed into place, before this
    # call looks at it: refused before the program runs (it would compute the other's data).
    real_replace = os.replace

    def racing_replace(src, dst):
        real_replace(src, dst)
        if os.path.basename(dst) == "k2.x1.npy":
            np.save(str(dst) + ".other.npy", other)
            real_replace(str(dst) + ".other.npy", dst)

    monkeypatch.setattr(os, "replace", racing_replace)
    with pytest.raises(ntkd.errors.StoreError, match="replaced k2.x1.npy as this call wrote it"):
        ntkd.batch(kernel_fn(), x1, x2, store=tmp_path / "k2.ntk", tile=TILE, progress=False)
    assert not os.path.exists(tmp_path / "k2.ntk"), "the program ran"


@pytest.mark.parametrize("name", ["#k.ntk", ";k.ntk", "-h.ntk", "--overwrite.ntk"])
def test_store_names_the_job_file_could_misread(tmp_path, data, name):
    # A value starting with '#' or ';' is a comment in a job file, and a job file named -h
    # is an option to the program: such store names are legitimate file names all the same.
    x1 = data[0]
    S = ntkd.batch(kernel_fn(), x1, store=tmp_path / name, tile=TILE, progress=False)
    assert S.complete and np.array_equal(S["ntk"][:, :], kernel_fn()(x1).ntk)
    S = ntkd.batch(kernel_fn(), x1, store=tmp_path / name, tile=TILE, progress=False)  # resumes: nothing to do
    stem = name[:-4]
    assert last_to_compute(tmp_path / f"{stem}.log")[0] == 0


def test_ranks_2_under_mpirun_same_bytes(tmp_path, data):
    x1, x2 = data
    one = ntkd.batch(kernel_fn(), x1, x2, store=tmp_path / "one.ntk", tile=TILE, test_test=True, progress=False)
    two = ntkd.batch(kernel_fn(), x1, x2, store=tmp_path / "two.ntk", ranks=2, tile=TILE, test_test=True,
                     progress=False)
    assert "on 2 workers" in open(tmp_path / "two.log").read()
    for g in ("nngp", "ntk"):
        a, b = one[g][:, :], two[g][:, :]
        assert a.tobytes() == b.tobytes(), g


@pytest.mark.parametrize("ranks", [None, 2])
def test_stop_stores_and_resumes(tmp_path, ranks):
    # The progress callable raises KeyboardInterrupt as Ctrl-C would, at the first progress
    # line after a tile arrived: the job gets its stop signal (SIGINT, or SIGUSR1 to mpirun),
    # stores what is in flight, and the KeyboardInterrupt comes through.
    x = np.random.default_rng(1).standard_normal((1200, 8))
    seen = []

    def stop_at_first_tile(done, total):
        seen.append((done, total))
        if done >= 1 and sum(d >= 1 for d, _ in seen) == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ntkd.batch(slow_kernel_fn(), x, store=tmp_path / "s.ntk", ranks=ranks, tile=32, progress=stop_at_first_tile)
    S = ntkd.store.open(tmp_path / "s.ntk")
    present, needed = S.tiles_present, S.tiles_needed
    assert 0 < present < needed, (present, needed)
    assert "interrupted with %d of %d tiles stored" % (present, needed) in open(tmp_path / "s.log").read()
    # A rerun computes only what is missing; stop it at its first line.
    first = []

    def stop_at_once(done, total):
        first.append((done, total))
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ntkd.batch(slow_kernel_fn(), x, store=tmp_path / "s.ntk", ranks=ranks, tile=32, progress=stop_at_once)
    assert first[0] == (present, needed)
    assert last_to_compute(tmp_path / "s.log") == (needed - present, needed)


def wait_for_a_stored_tile(p, log):
    """Until the job of the Python process p computes: a progress line (one a second) in its log
    counts a stored tile."""
    deadline = time.monotonic() + 300
    while not (log.exists() and re.search(r"^ntkd: [1-9]\d*/\d+ tiles \(", log.read_text(), re.M)):
        assert p.poll() is None, "batch ended before it was stopped"
        assert time.monotonic() < deadline, "no progress line in 300 s"
        time.sleep(0.05)


def test_ctrl_c_in_a_terminal(tmp_path):
    # SIGINT to the whole process group of a Python process running batch, as a terminal's
    # Ctrl-C does: the job (in a session of its own) gets one SIGINT from batch, stores the
    # tiles in flight, exits 5, and batch raises KeyboardInterrupt.
    script = textwrap.dedent(f"""
        import signal
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (a test runner may ignore it)
        import numpy as np, ntkd
        from ntkd import stax
        kf = stax.serial(stax.repeat(stax.serial(stax.Dense(8), stax.Relu()), 1000), stax.Dense(1))[2]
        x = np.random.default_rng(1).standard_normal((1200, 8))
        try:
            ntkd.batch(kf, x, store={str(tmp_path / 's.ntk')!r}, tile=32, progress=lambda done, total: None)
        except KeyboardInterrupt:
            print('KeyboardInterrupt')
    """)
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=True)
    log = tmp_path / "s.log"
    wait_for_a_stored_tile(p, log)
    os.killpg(p.pid, signal.SIGINT)
    out, _ = p.communicate(timeout=300)
    assert out.strip() == "KeyboardInterrupt"
    text = log.read_text()
    assert "signal 2: finishing the tiles in flight" in text and text.count("signal ") == 1
    S = ntkd.store.open(tmp_path / "s.ntk")
    assert 0 < S.tiles_present < S.tiles_needed
    assert f"interrupted with {S.tiles_present} of {S.tiles_needed} tiles stored" in text


@pytest.mark.parametrize("ranks", [None, 2])
def test_the_job_stops_when_its_python_process_is_killed(tmp_path, ranks):
    # SIGKILL of the Python process running batch (a notebook kernel restarted; SIGTERM and a
    # closed terminal's SIGHUP the same): the job, in a session of its own, gets its stop signal
    # (SIGINT, or SIGUSR1 to mpirun), stores the tiles in flight and exits. It ran on, holding
    # the store: a rerun raised StoreInUseError until it ended.
    script = textwrap.dedent(f"""
        import numpy as np, ntkd
        from ntkd import stax
        kf = stax.serial(stax.repeat(stax.serial(stax.Dense(8), stax.Relu()), 1000), stax.Dense(1))[2]
        x = np.random.default_rng(1).standard_normal((1200, 8))
        ntkd.batch(kf, x, store={str(tmp_path / 's.ntk')!r}, ranks={ranks!r}, tile=32, progress=lambda done, total: None)
    """)
    p = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    wait_for_a_stored_tile(p, tmp_path / "s.log")
    p.kill()
    p.wait()
    # A rerun takes the store once the job has stopped (StoreInUseError while it runs on) and
    # resumes what it stored. The job that ran on finished every tile first (about 20 s).
    first = []

    def stop_at_once(done, total):
        first.append((done, total))
        raise KeyboardInterrupt

    x = np.random.default_rng(1).standard_normal((1200, 8))
    deadline = time.monotonic() + 120
    while True:
        try:
            ntkd.batch(slow_kernel_fn(), x, store=tmp_path / "s.ntk", ranks=ranks, tile=32, progress=stop_at_once)
        except ntkd.StoreInUseError:
            assert time.monotonic() < deadline, "the store still in use 120 s after its Python process was killed"
            time.sleep(0.2)
            continue
        except KeyboardInterrupt:
            break
    done, needed = first[0]
    assert 0 < done < needed, first


def test_progress_bar_from_the_programs_lines(tmp_path, data, monkeypatch):
    bars = []

    class FakeBar:  # the part of tqdm's interface batch uses
        def __init__(self, total=None, **kw):
            self.total, self.n, self.closed = total, 0, False
            bars.append(self)

        def update(self, k):
            self.n += k

        def close(self):
            self.closed = True

    import types
    fake = types.ModuleType("tqdm.auto")
    fake.tqdm = FakeBar
    monkeypatch.setitem(sys.modules, "tqdm.auto", fake)
    S = ntkd.batch(kernel_fn(), data[0], store=tmp_path / "k.ntk", tile=TILE)
    assert len(bars) == 1 and bars[0].closed
    assert bars[0].total == bars[0].n == S.tiles_needed
    assert "progress = 1" in open(tmp_path / "k.conf").read()
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # tqdm not installed: no bar, no error
    ntkd.batch(kernel_fn(), data[0], store=tmp_path / "k.ntk", tile=TILE)
    assert len(bars) == 1


def test_failure_raises_the_exit_codes_exception(tmp_path, rng):
    x = rng.standard_normal((20, 6)).astype(np.float32)
    deep = stax.serial(stax.repeat(stax.serial(stax.Dense(1, W_std=2.0), stax.Relu()), 150), stax.Dense(1))[2]
    with pytest.raises(ntkd.NonFiniteKernelError, match="exceeds float32"):
        ntkd.batch(deep, x, store=tmp_path / "d.ntk", progress=False)


def test_labels_written_for_ntkd_solve(tmp_path, data):
    x1, x2 = data
    y1, y2 = np.arange(N1) % 3, np.arange(N2) % 3
    ntkd.batch(kernel_fn(), x1, x2, store=tmp_path / "k.ntk", labels=(y1, y2), progress=False)
    job = open(tmp_path / "k.conf").read()
    assert "labels = k.y1.npy" in job and "labels = k.y2.npy" in job
    assert np.array_equal(np.load(tmp_path / "k.y1.npy"), y1) and np.array_equal(np.load(tmp_path / "k.y2.npy"), y2)
    # Labels changed: the job runs staged, its files under temporary names, whose labels the
    # program took for IDX by the name (k.y1.npy.new8244: "not an IDX file"). Taken now.
    ntkd.batch(kernel_fn(), x1, x2, store=tmp_path / "k.ntk", labels=(y1[::-1].copy(), y2), progress=False)
    assert np.array_equal(np.load(tmp_path / "k.y1.npy"), y1[::-1])
    assert not [f for f in os.listdir(tmp_path) if ".new" in f]


def test_program_not_found(tmp_path, data, monkeypatch):
    monkeypatch.setenv("NTKD_PROGRAM", str(tmp_path / "no-such-program"))
    with pytest.raises(FileNotFoundError, match="NTKD_PROGRAM"):
        ntkd.batch(kernel_fn(), data[0], store=tmp_path / "k.ntk", progress=False)


@pytest.mark.parametrize("call, exc", [
    (lambda kf, x1, x2, s: ntkd.batch(lambda *a: None, x1, store=s), TypeError),
    (lambda kf, x1, x2, s: ntkd.batch(kf, x1, store=123), TypeError),
    (lambda kf, x1, x2, s: ntkd.batch(kf, np.array([["a"]]), store=s), TypeError),
    (lambda kf, x1, x2, s: ntkd.batch(kf, x1[:, 0], store=s), ValueError),
    (lambda kf, x1, x2, s: ntkd.batch(kf, x1, x2[:, :4], store=s), ValueError),
    (lambda kf, x1, x2, s: ntkd.batch(kf, np.where(x1 > 1, np.nan, x1), store=s), ValueError),
    (lambda kf, x1, x2, s: ntkd.batch(kf, x1[:0], store=s), ValueError),
    # a float64 sample below float32's range: all zeros in float32 (the job file's loader refuses it too)
    (lambda kf, x1, x2, s: ntkd.batch(kf, np.where(np.arange(len(x1))[:, None] == 2, x1 * 1e-50, x1).astype(np.float64),
                                      store=s, precision="float32"), ValueError),
    (lambda kf, x1, x2, s: ntkd.batch(kf, x1, store=s, kernel="both"), ValueError),
    (lambda kf, x1, x2, s: ntkd.batch(kf, x1, store=s, precision="float16"), ValueError),
    (lambda kf, x1, x2, s: ntkd.batch(kf, x1, store=s, ranks=0), ValueError),
    (lambda kf, x1, x2, s: ntkd.batch(kf, x1, store=s, ranks=1.5), TypeError),
    (lambda kf, x1, x2, s: ntkd.batch(kf, x1, store=s, tile=0), ValueError),
    (lambda kf, x1, x2, s: ntkd.batch(kf, x1, store=s, tile="8"), TypeError),
    (lambda kf, x1, x2, s: ntkd.batch(kf, x1, store=s, test_test=True), ValueError),
    (lambda kf, x1, x2, s: ntkd.batch(kf, x1, store=s, labels=(x1[:, 0], x1[:, 0])), ValueError),
    (lambda kf, x1, x2, s: ntkd.batch(kf, x1, x2, store=s, labels=(np.arange(N1), np.arange(3))), ValueError),
    (lambda kf, x1, x2, s: ntkd.batch(kf, x1, x2, store=s, labels=(np.arange(N1) - 1, np.arange(N2))), ValueError),
    (lambda kf, x1, x2, s: ntkd.batch(kf, x1, store=s, progress=5), TypeError),
    (lambda kf, x1, x2, s: ntkd.batch(kf, x1, store=s, backend="tpu"), ValueError),
    (lambda kf, x1, x2, s: ntkd.batch(kf, x1, store=os.path.join(os.path.dirname(s), "a b.ntk")), ValueError),
])
def test_bad_arguments_raise_before_anything_is_written(tmp_path, data, call, exc):
    with pytest.raises(exc):
        call(kernel_fn(), data[0], data[1], str(tmp_path / "k.ntk"))
    assert os.listdir(tmp_path) == []


def test_graph_patterns_beside_the_store(tmp_path, rng):
    # A graph network's patterns go beside the store (k.p1.npy, k.p2.npy, named by [data] and
    # [test] pattern); the store holds kernel_fn's values bit for bit, a rerun resumes, and
    # another pattern is another job.
    x1, x2 = rng.standard_normal((9, 5, 2)), rng.standard_normal((4, 5, 2))
    p1, p2 = rng.uniform(size=(9, 5, 5)) * (rng.uniform(size=(9, 5, 5)) < 0.5), rng.uniform(size=(4, 5, 5))
    kf = stax.serial(stax.Dense(4, W_std=1.3, b_std=0.1), stax.Relu(), stax.Aggregate(), stax.Dense(4), stax.Relu(),
                     stax.GlobalAvgPool(), stax.Dense(1))[2]
    S = ntkd.batch(kf, x1, x2, store=tmp_path / "k.ntk", tile=3, test_test=True, pattern=(p1, p2), progress=False)
    job = open(tmp_path / "k.conf").read()
    assert "pattern = k.p1.npy" in job and "pattern = k.p2.npy" in job
    assert np.array_equal(np.load(tmp_path / "k.p2.npy"), p2)
    k = kf(np.concatenate([x1, x2]), None, ("nngp", "ntk"), pattern=(np.concatenate([p1, p2]),) * 2)
    for g in ("nngp", "ntk"):
        assert np.array_equal(S[g][:, :], getattr(k, g)), g
    S.close()
    S = ntkd.batch(kf, x1, x2, store=tmp_path / "k.ntk", tile=3, test_test=True, pattern=(p1, p2), progress=False)
    assert last_to_compute(tmp_path / "k.log")[0] == 0 and S.complete
    S.close()
    q1 = p1.copy()
    q1[0, 0, 0] += 1
    with pytest.raises(ValueError, match="data values"):
        ntkd.batch(kf, x1, x2, store=tmp_path / "k.ntk", tile=3, test_test=True, pattern=(q1, p2), progress=False)
    assert np.array_equal(np.load(tmp_path / "k.p1.npy"), p1)  # the refused job left the store's files alone


class _BrokenStream:
    """A stderr whose reader went away (`python s.py 2>&1 | head`): every write fails."""

    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.parametrize("stderr", [_BrokenStream(), None], ids=["broken pipe", "no stderr"])
def test_a_failing_stderr_loses_the_echo_not_the_job(tmp_path, data, monkeypatch, stderr):
    # verbose=True echoes the program's lines onto stderr: a failed write was taken for Ctrl-C,
    # the job stopped, then killed, and batch raised BrokenPipeError over an unfinished store
    monkeypatch.setattr(sys, "stderr", stderr)
    S = ntkd.batch(kernel_fn(), data[0], store=tmp_path / "k.ntk", tile=TILE, progress=False, verbose=True)
    assert S.complete
    assert last_to_compute(tmp_path / "k.log")[1] == S.tiles_needed  # the log got every line


def test_a_failing_progress_bar_loses_the_bar_not_the_job():
    from ntkd import _program

    class Bar:
        n, total = 0, None

        def update(self, k):
            raise BrokenPipeError(32, "Broken pipe")  # tqdm writing to a stderr whose reader went away

        def close(self):
            raise BrokenPipeError(32, "Broken pipe")

    t = _program.Tracker(False, "kernel")
    t.bar = Bar()
    t.line("ntkd: 3 of 10 tiles to compute on 2 workers")
    assert t.bar is None  # dropped; the job goes on
    t.line("ntkd: 5/10 tiles (50 %)")
    t.close()

    def callback(done, total):
        raise RuntimeError("stop")  # the caller's own callable: its exception still stops the job

    t = _program.Tracker(callback, "kernel")
    with pytest.raises(RuntimeError):
        t.line("ntkd: 3 of 10 tiles to compute on 2 workers")


def test_a_removed_working_folder_is_named(tmp_path, data, monkeypatch):
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    with pytest.raises(FileNotFoundError, match="working folder no longer exists"):
        ntkd.batch(kernel_fn(), data[0], store="k.ntk", progress=False)


def test_two_threads_writing_one_file_each_use_their_own_temporary(tmp_path, monkeypatch):
    """Two threads of one process writing the same store file at once: the temporary file's name
    was unique per process only, so one thread's rename took the other's half-written file and the
    other got a bare FileNotFoundError (ntkd.batch from a thread pool). Both writes are held inside
    np.save until the other is there too."""
    import threading
    from ntkd import _batch
    barrier, real_save, failures = threading.Barrier(2), np.save, []
    monkeypatch.setattr(np, "save", lambda f, a: (real_save(f, a), barrier.wait(30)))

    def write(value):
        try:
            _batch._write(str(tmp_path / "f.npy"), np.full(3, value))
        except BaseException as e:
            failures.append(e)
    threads = [threading.Thread(target=write, args=(v,)) for v in (1.0, 2.0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures
    assert np.load(tmp_path / "f.npy")[0] in (1.0, 2.0) and not list(tmp_path.glob(".*.part"))


def test_arrays_the_kernels_would_misread_are_refused(tmp_path, data):
    # Found by a hunt. A masked array was computed on the values under its mask (np.asarray drops
    # the mask; neural-tangents raises ValueError); a longdouble sample whose values are all 0 in
    # float64 gave a kernel of 0 without a word (ntkd.batch refused it, naming |value| 0 and
    # advising precision='float64', already the precision); x1 of shape (5, 0) was refused by the
    # program after the job's files were written.
    from ntkd import predict
    kf = kernel_fn()
    x = np.ma.masked_array(data[0], mask=np.zeros_like(data[0], dtype=bool))
    x.mask[3, 2] = True
    with pytest.raises(ValueError, match="x1 is a masked array"):
        kf(x, None, "ntk")
    with pytest.raises(ValueError, match="x2 is a masked array"):
        kf(data[0], x, "ntk")
    with pytest.raises(ValueError, match="x1 is a masked array"):
        ntkd.batch(kf, x, store=tmp_path / "m.ntk", progress=False)
    assert not os.listdir(tmp_path)
    k = kf(data[0], None, "ntk")
    y = np.ma.masked_array(np.ones((N1, 1)), mask=False)
    with pytest.raises(ValueError, match="y_train is a masked array"):
        predict.gp_inference(k, y)
    with pytest.raises(ValueError, match="x_train is a masked array"):
        predict.gradient_descent_mse_ensemble(kf, x, np.ones((N1, 1)))(x_test=data[1], get="ntk")
    S = ntkd.batch(kf, data[0], store=tmp_path / "k.ntk", progress=False)
    with pytest.raises(ValueError, match="matvec: v is a masked array"):
        S["ntk"].matvec(np.ma.masked_array(np.ones(N1), mask=False))
    S.close()
    with pytest.raises(ValueError, match=r"y_train has shape \(0, 1\): the predictions need n >= 1"):
        predict.gp_inference(np.zeros((0, 0)), np.zeros((0, 1)))
    tiny = np.ones((3, 4), dtype=np.longdouble) * np.longdouble("1e-400")
    if tiny.any():  # where longdouble is wider than float64 (x86)
        with pytest.raises(ValueError, match=r"x1\[0\]: every value is 0 in float64, though its values are not "
                                             r"\(the largest \|value\| 1\.000e-400\).*; scale the data$"):
            kf(tiny, None, "ntk")
        with pytest.raises(ValueError, match=r"every value is 0 in float64, .*1\.000e-400.*; scale the data$"):
            ntkd.batch(kf, tiny, store=tmp_path / "t.ntk", progress=False)
    with pytest.raises(ValueError, match=r"x1\[0\]: every value is 0 in float32, .* scale the data, or "
                                         r"precision='float64'$"):
        ntkd.batch(kf, np.full((3, 4), 1e-50), store=tmp_path / "f.ntk", precision="float32", progress=False)
    # labels and times too (a second hunt); a finite value past float32 named as itself, not inf
    with pytest.raises(ValueError, match=r"labels\[0\] is a masked array"):
        ntkd.batch(kf, data[0], data[1], store=tmp_path / "l.ntk", progress=False,
                   labels=(np.ma.masked_array(np.arange(N1) % 3, mask=False), np.arange(N2) % 3))
    with pytest.raises(ValueError, match="t is a masked array"):
        predict.gradient_descent_mse(k, np.ones((N1, 1)))(np.ma.masked_array([1., 2.], mask=[False, True]), 0.)
    big = data[0].copy()
    big[0, 2] = 1.3e39
    with pytest.raises(ValueError, match=r"x1\[0, 2\] is 1\.3e\+39, beyond float32's range: scale the data, or "
                                         r"precision='float64'"):
        ntkd.batch(kf, big, store=tmp_path / "b.ntk", precision="float32", progress=False)
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(ValueError, match=r"x1 has shape \(5, 0\): a sample of no values"):
        ntkd.batch(kf, np.zeros((5, 0)), store=tmp_path / "z.ntk", progress=False)
    assert sorted(os.listdir(tmp_path)) == before
