"""ntkd.batch: a ``kernel_fn`` of ntkd.stax computed by the ntkd program into
a store, the checkpoint that a rerun resumes (docs/STORE-FORMAT.md)."""

import inspect
import numbers
import os
import sys
import threading

import numpy as np

from . import _kernel, _program
from ._kernel import KernelFn
from .errors import raise_for_exit

_MAX_TILE = 16384


class Files:
    """The files ntkd.batch keeps beside a store STEM.ntk (STEM: the store's
    name without .ntk): the job STEM.conf, the data STEM.x1.npy and
    STEM.x2.npy (the [test] set), the labels STEM.y1.npy and STEM.y2.npy, a
    graph network's patterns STEM.p1.npy and STEM.p2.npy, and STEM.log
    (every line of every run, appended)."""

    def __init__(self, store):
        if not isinstance(store, (str, os.PathLike)):
            raise TypeError(f"store must be a path (str or os.PathLike), not {type(store).__name__}")
        try:
            path = os.path.abspath(os.fsdecode(os.fspath(store)))
        except FileNotFoundError:  # a relative path, from a working folder removed since
            raise FileNotFoundError(f"store {os.fspath(store)!r}: this process's working folder no longer exists "
                                    "(removed since it was entered): give the store an absolute path, or "
                                    "os.chdir() to a folder that exists") from None
        self.folder, self.name = os.path.split(path)
        if not self.name or os.path.isdir(path):
            raise ValueError(f"store {store!r} is a folder, not a store file")
        # The job file names the data by their names: ntkd splits [data] path at whitespace
        # (several files) and reads ' #' or ' ;' as a comment.
        if any(c.isspace() for c in self.name):
            raise ValueError(f"store {self.name!r}: ntkd.batch names its data files after the store, and a job file "
                             "cannot name files with whitespace: choose a store name without it")
        self.store = path
        self.stem = self.name[:-4] if self.name.endswith(".ntk") and len(self.name) > 4 else self.name
        self.job = self._at("conf")
        self.log = self._at("log")

    def _at(self, ext):
        return os.path.join(self.folder, f"{self.stem}.{ext}")

    def data(self, which, tag=""):
        """The name (in the store's folder) of x1, x2, y1, y2, p1 or p2; with tag, a staged job's
        (STEM.x1.new8244.npy: before the extension, by which the program tells a labels file's
        format: STEM.y1.npy.new8244 was read as IDX and refused)."""
        return f"{self.stem}.{which}{tag}.npy"


def _write(path, content):
    """Write text, or an array as .npy, through a temporary file in the same folder renamed into place.
    Returns the file's _identity as this call left it, or None where another writer's file already
    stands at path (renamed over this one as soon as it was in place)."""
    # unique per thread, not only per process: two threads writing one store's files each had the
    # other's temporary file renamed away under them (a bare FileNotFoundError)
    tmp = os.path.join(os.path.dirname(path),
                       f".{os.path.basename(path)}.{os.getpid()}.{threading.get_ident()}.part")
    try:
        with open(tmp, "w" if isinstance(content, str) else "wb") as f:
            if isinstance(content, str):
                f.write(content)
            else:
                np.save(f, content)
            mine = os.fstat(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    now = _identity(path)
    return now if now is not None and now[:2] == (mine.st_dev, mine.st_ino) else None


def _identity(path):
    """What changes when a file is replaced or rewritten (without reading it): None if absent."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return _identity_of(st)


def _identity_of(st):
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _holds(path, content):
    """The _identity of the file at path if it holds exactly what _write would write for
    content, else None. The identity is the very file's that was read (taken through its
    descriptor, before and after reading), so that a file replaced or rewritten meanwhile
    never passes for the one compared."""
    if isinstance(content, str):
        data = content.encode()
    else:
        import io
        buf = io.BytesIO()
        np.save(buf, content)
        data = buf.getvalue()
    try:
        with open(path, "rb") as f:
            before = _identity_of(os.fstat(f.fileno()))
            if before[2] != len(data) or f.read(len(data) + 1) != data:
                return None
            if _identity_of(os.fstat(f.fileno())) != before:
                return None
    except OSError:
        return None
    return before


def _replaced(files, relied):
    """The names among relied ((name, identity) pairs: the files beside the store this call
    wrote or found holding its job) whose file is no longer the one this call relied on."""
    return [name for name, ident in relied if ident is None or _identity(os.path.join(files.folder, name)) != ident]


def _rows(a, p):
    """The samples as the program holds them: each sample's values, then its pattern's (a graph's)."""
    if p is None:
        return a
    return np.concatenate([a.reshape(a.shape[0], -1), p.reshape(p.shape[0], -1)], axis=1)


def _data_hash(a1, a2, p1=None, p2=None):
    """XXH3-128 of the data as the program computes on them (x1 then x2, as stored in the
    .npy files, each sample followed by its pattern where there are some): the store's job
    text's `data values` (docs/STORE-FORMAT.md)."""
    import xxhash
    h = xxhash.xxh3_128()
    for a, p in ((a1, p1), (a2, p2)):
        if a is not None:
            h.update(memoryview(np.ascontiguousarray(_rows(a, p))).cast("B"))
    return h.hexdigest()


def _job_difference(S, kernel_fn, a1, a2, kernel, precision, test_test, p1=None, p2=None):
    """'' if the opened store S is of this call's job (its job text's sizes, precision,
    kernels, split, data values and layers: docs/STORE-FORMAT.md), else the first that differs."""
    n1, n2 = a1.shape[0], 0 if a2 is None else a2.shape[0]
    want = {"samples": str(n1 + n2), "precision": precision, "kernels": "nngp+ntk" if kernel == "ntk" else "nngp",
            "train samples": str(n1 if n2 else 0), "test x test": "yes" if n2 and test_test else "no"}
    if S.job_text_damaged:  # the header's copy of the sizes only (the files' identities still hold)
        have = {"samples": str(S.n), "precision": S.precision, "kernels": "+".join(S.kernels),
                "train samples": str(S.n_train), "test x test": "yes" if S.test_test else "no"}
    else:
        have, layers = {}, []
        for line in S.job_text.splitlines():
            key, sep, value = line.partition(" = ")
            if not sep:
                continue
            if key.startswith("layer ") and key[6:].isdigit():
                layers.append(value)
            else:
                have.setdefault(key, value)
        want["features"] = str(int(np.prod(a1.shape[1:])) + (int(np.prod(p1.shape[1:])) if p1 is not None else 0))
        want["data values"] = _data_hash(a1, a2, p1, p2)
        want["layers"] = kernel_fn.canonical()
        have["layers"] = ("parameterization=standard: " if have.get("parameterization") == "standard" else "") + \
            " ".join(layers)
    for key, value in want.items():
        if have.get(key) != value:
            return f"{key}: the store has {have.get(key)!r}, this call {value!r}"
    return ""


def _labels(y, n, what):
    _kernel._unmasked(y, what)
    try:
        a = np.asarray(y)
    except Exception as e:
        raise TypeError(f"{what} must be an array of integer class labels, not {type(y).__name__}") from e
    if a.dtype.kind not in "iu" and not (a.dtype.kind == "f" and a.size and np.all(np.isfinite(a))
                                         and np.all(a == np.round(a))):
        raise TypeError(f"{what} must hold integer class labels, not {a.dtype}")
    if a.ndim != 1 or a.shape[0] != n:
        raise ValueError(f"{what} has shape {a.shape}: one label per sample, ({n},)")
    if a.size and (a.min() < 0 or a.max() > 65535):
        raise ValueError(f"{what}: labels are classes 0 to 65535 (docs/JOB-FILE.md, Labels)")
    return a.astype(np.int64)


def _word(name):
    """A file name (in the store's folder) as a job file value: one that starts with '#' or ';'
    would be read as a comment after the '=' (docs/JOB-FILE.md), so it is written as ./NAME."""
    return f"./{name}" if name[:1] in ("#", ";") else name


def _job_text(kernel_fn, x1, x2, kernel, precision, tile, test_test, labels, backend, level, progress, names,
              graph=False):
    names = {k: _word(v) for k, v in names.items()}
    lines = ["# Written by ntkd.batch: rerun with `ntkd THIS.conf` (or mpirun -np RANKS+1 ntkd THIS.conf) to resume.",
             "[data]", f"path = {names['x1']}", "format = npy"]
    if x1.ndim == 3:
        lines.append("layout = NLC")  # (N, L, C) sequences, as kernel_fn reads a 3-D array
    if labels is not None:
        lines.append(f"labels = {names['y1']}")
    if graph:
        lines.append(f"pattern = {names['p1']}")
    if x2 is not None:
        lines += ["[test]", f"path = {names['x2']}", f"test_test = {'yes' if test_test else 'no'}"]
        if labels is not None:
            lines.append(f"labels = {names['y2']}")
        if graph:
            lines.append(f"pattern = {names['p2']}")
    lines += ["[model]", f"arch = {kernel_fn.arch}", f"kernel = {kernel}"]
    if kernel_fn.parameterization == "standard":
        lines.append("parameterization = standard")
    lines += ["[compute]", f"precision = {precision}"]
    if tile is not None:
        lines.append(f"tile = {tile}")
    if backend is not None:
        lines.append(f"backend = {backend}")
    lines += ["[output]", f"path = {names['store']}"]
    if level is not None:
        lines.append(f"level = {level}")
    if progress:
        lines.append("progress = 1")  # a line a second for the bar (a pipe is no terminal)
    return "\n".join(lines) + "\n"


_NT_BATCH_ARGS = ("batch_size", "device_count", "store_on_device")


def _nt_batch(kernel_fn, x1, x2, nt_args, unknown, given):
    """neural-tangents' nt.batch(kernel_fn, batch_size, device_count, store_on_device) with `import
    ntkd as nt`: kernel_fn itself (any callable: ntkd's kernel_fn, or a function calling it). It
    already computes tile by tile within memory on every core, which is what the wrapper does for
    neural-tangents' (the same numbers, without the wrapper's blocks)."""
    def nt_words(why):
        return TypeError(f"ntkd.batch(kernel_fn, ...) {why}: with neural-tangents' arguments (batch_size, "
                         "device_count, store_on_device; or none) it is nt.batch, which returns kernel_fn itself "
                         "(ntkd's kernel_fn computes in tiles, within memory); ntkd.batch(kernel_fn, x1, x2, "
                         "store=...) computes into a store that a rerun resumes")
    # nt.batch(kernel_fn, batch_size, device_count, store_on_device) by position: in x1, x2 and store's places
    given = dict(given)
    for name, value, fits in (("batch_size", x1, True),
                              ("device_count", x2, isinstance(x2, (numbers.Integral, np.integer))),
                              ("store_on_device", given["store"], isinstance(given["store"], (bool, np.bool_)))):
        if value is None or not fits:
            continue
        if name in nt_args:
            raise nt_words(f"got {name} twice (by position and by name)")
        nt_args[name] = value
        if name == "device_count":
            x2 = None
        if name == "store_on_device":
            given["store"] = _BATCH_DEFAULTS["store"]

    def changed(value, default):
        return value is not default if default is None or isinstance(default, bool) else value != default
    extra = (["x2"] if x2 is not None else []) + list(unknown)
    extra += [k for k, v in _BATCH_DEFAULTS.items() if changed(given[k], v)]
    if extra:
        raise nt_words(f"mixes neural-tangents' nt.batch arguments with {', '.join(extra)}")
    for name, ok, want in (("batch_size", lambda v: v >= 0, "an integer >= 0"),
                           ("device_count", lambda v: True, "an integer")):
        v = nt_args.get(name, 0)
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Integral, np.integer)) or not ok(v):
            raise nt_words(f"got {name}={v!r}, not {want}")
    if not isinstance(nt_args.get("store_on_device", True), (bool, np.bool_)):
        raise nt_words(f"got store_on_device={nt_args['store_on_device']!r}, not True or False")
    # Any callable, as neural-tangents' nt.batch takes any kernel_fn(x1, x2, *args, **kwargs): ntkd's
    # kernel_fn wrapped by jax.jit, functools.partial or a lambda was refused (a hunt).
    if not callable(kernel_fn):
        raise TypeError(f"kernel_fn must be a kernel_fn (stax.serial(...)[2], or a function calling one), not "
                        f"{kernel_fn!r}")
    return kernel_fn


_FILES = ("x1", "x2", "y1", "y2", "p1", "p2")  # the arrays beside the store (Files.data)


def batch(kernel_fn, x1=None, x2=None, store="k.ntk", ranks=None, *, kernel="ntk", precision=None, tile=None,
          test_test=False, labels=None, backend=None, level=None, overwrite=False, progress=True, verbose=False,
          pattern=None, **unknown):
    """Compute ``kernel_fn`` of x1 (and x2) with the ntkd program into a store,
    and return the store opened for reading (ntkd.store.Store).

    Beside the store STEM.ntk it writes the data as STEM.x1.npy and (x2, the
    [test] set) STEM.x2.npy, the job STEM.conf (docs/JOB-FILE.md: the
    network is kernel_fn.arch) and appends what the program prints to
    STEM.log. ranks None or 1: one process (`ntkd STEM.conf`); ranks R > 1:
    `mpirun -np R+1 ntkd STEM.conf` (R computing ranks and a coordinator).
    A store of the same job is resumed (a rerun computes only the tiles it
    lacks: none if it is complete; its files are left as they are and
    STEM.conf is run); a store of another job raises ValueError and is left
    as it was, with its files, unless overwrite=True.

    x1: (N, D) vectors, (N, L, C) sequences or (N, H, W, C) images; x2: the
    same sample shape, stored after x1 as the test set: the store then holds
    x1 x x1 and x2 x x1 (kernel_fn(x2, x1)), and x2 x x2 with test_test=True,
    the values of kernel_fn(np.concatenate([x1, x2])) bit for bit.
    precision None: float64 when x1 or x2 is float64 or JAX runs with
    jax_enable_x64, else float32, as kernel_fn computes (a store made in
    the other precision is another job: give precision= to resume it);
    'float32' or 'float64' converts the data. kernel 'ntk' stores NNGP and
    NTK, 'nngp' the NNGP. tile: the tile edge (default ntkd's).
    labels: (train labels, test labels), integer classes, written as
    STEM.y1.npy and STEM.y2.npy for `ntkd solve` (needs x2). backend:
    'auto', 'cpu' or 'cuda' ([compute] backend); level: zstd level.
    progress: True for a tqdm bar (when tqdm is installed), or a
    callable(done, total) in tiles; verbose: print the program's lines.
    pattern: a graph network's (pattern1, pattern2), as kernel_fn takes it,
    written as STEM.p1.npy and STEM.p2.npy, one V x V matrix per sample.

    Ctrl-C stops the job as a signal does (what is in flight is stored, exit
    5) and raises KeyboardInterrupt: rerun to resume. A failure raises the
    exception of its exit code (docs/CLI.md) with the program's error line.

    With neural-tangents' arguments instead, ``batch(kernel_fn, batch_size=0,
    device_count=-1, store_on_device=True)`` (``import ntkd as nt`` code's
    ``nt.batch``), it returns kernel_fn itself: ntkd's kernel_fn already
    computes in tiles, within memory, on every core.
    """
    nt_args = {k: unknown.pop(k) for k in list(unknown) if k in _NT_BATCH_ARGS}
    # neural-tangents' nt.batch(kernel_fn, batch_size=0, device_count=-1, store_on_device=True): its batch
    # size in x1's place (or given by name, or none), no data
    if nt_args or x1 is None or (isinstance(x1, (numbers.Number, np.number)) and not isinstance(x1, bool)):
        return _nt_batch(kernel_fn, x1, x2, nt_args, unknown, locals())
    if unknown:
        raise TypeError(f"ntkd.batch got an unexpected keyword argument {next(iter(unknown))!r}")
    if not isinstance(kernel_fn, KernelFn):
        raise TypeError(f"kernel_fn must be a kernel_fn of ntkd.stax (stax.serial(...)[2]), not {kernel_fn!r}")
    files = Files(store)
    kernel_fn._handle()  # the network's own errors first, as kernel_fn reports them
    if _kernel._no_pattern(pattern):  # stax's Aggregate without a pattern: the identity
        kernel_fn = kernel_fn.without_patterns()
    a1 = _kernel._as_array(x1, "x1")
    a2 = _kernel._as_array(x2, "x2")
    kernel_fn._check_spatial(a1, "x1")
    if precision is None:
        precision = "float64" if _kernel._wide(a1, a2) else "float32"
    if precision not in ("float32", "float64"):
        raise ValueError(f"precision must be 'float32', 'float64' or None, not {precision!r}")
    dtype = np.dtype(precision)
    if kernel not in ("ntk", "nngp"):
        raise ValueError(f"kernel must be 'ntk' (NNGP and NTK) or 'nngp', not {kernel!r}")
    if backend not in (None, "auto", "cpu", "cuda"):
        raise ValueError(f"backend must be 'auto', 'cpu', 'cuda' or None, not {backend!r}")
    tile = _program.check_int(tile, "tile", 1, _MAX_TILE)
    level = _program.check_int(level, "level", -7, 19)
    ranks = _program.check_ranks(ranks, "ntkd.batch")
    _program.check_progress(progress)
    for name, flag in (("test_test", test_test), ("overwrite", overwrite), ("verbose", verbose)):
        if not isinstance(flag, (bool, np.bool_)):
            raise TypeError(f"{name} must be True or False, not {flag!r}")
    if a1.shape[0] == 0:
        raise ValueError("x1 has no samples")
    if 0 in a1.shape[1:]:  # refused before any file is written (the program refused it after)
        raise ValueError(f"x1 has shape {a1.shape}: a sample of no values")
    if a2 is not None:
        if a2.shape[1:] != a1.shape[1:]:
            raise ValueError(f"x2's samples have shape {a2.shape[1:]}, x1's {a1.shape[1:]}: they must agree")
        if a2.shape[0] == 0:
            raise ValueError("x2 has no samples")
    elif test_test:
        raise ValueError("test_test=True needs a test set (x2)")
    given = (a1, a2)
    with np.errstate(over="ignore"):  # a value past the precision's range: named below
        a1 = np.ascontiguousarray(a1, dtype=dtype)
        a2 = np.ascontiguousarray(a2, dtype=dtype) if a2 is not None else None
    for name, a, g in (("x1", a1, given[0]), ("x2", a2, given[1])):
        if a is not None and not np.all(np.isfinite(a)):
            i = np.argwhere(~np.isfinite(a))[0]
            v = np.asarray(g)[tuple(i)]
            if np.isfinite(v):  # finite, past the precision's range (1.3e39 in float32)
                raise ValueError(f"{name}[{', '.join(map(str, i))}] is {v!r}, beyond {precision}'s range: scale the "
                                 "data" + (", or precision='float64'" if precision == "float32" else ""))
            raise ValueError(f"{name}[{', '.join(map(str, i))}] is {a[tuple(i)]}: ntkd takes finite values only")
        if a is not None:
            _kernel._check_narrowed(g, a, name, "precision='float64'")
    y = None
    if labels is not None:
        if a2 is None:
            raise ValueError("labels need a test set (x2): ntkd reads labels in a job with [test] ([solve])")
        if not isinstance(labels, (tuple, list)) or len(labels) != 2:
            raise TypeError("labels must be a pair (train labels, test labels)")
        y = (_labels(labels[0], a1.shape[0], "labels[0]"), _labels(labels[1], a2.shape[0], "labels[1]"))
    p1, p2 = _kernel._patterns(kernel_fn._ntkd_spec.graph, pattern, a1, a2, dtype)
    graph = p1 is not None

    os.makedirs(files.folder, exist_ok=True)
    final = {k: files.data(k) for k in _FILES}
    final["store"] = files.name
    job_final = _job_text(kernel_fn, a1, a2, kernel, precision, tile, test_test, y, backend, level, progress, final,
                          graph)
    arrays = [("x1", a1)] + ([("x2", a2)] if a2 is not None else []) + \
             ([("y1", y[0]), ("y2", y[1])] if y is not None else []) + \
             ([("p1", p1)] + ([("p2", p2)] if a2 is not None else []) if graph else [])
    written_final = [(os.path.basename(files.job), job_final)] + [(final[k], a) for k, a in arrays]
    # A store that exists may belong to another job: its files are replaced only once the
    # program has accepted the new job for it (it says how many tiles it computes), so that a
    # refused job leaves the store's data and job file as they were, and a job running on the
    # store never has its data replaced under it. Such a job is staged under temporary names.
    # A resume (the files beside the store already hold this job) writes nothing and runs
    # STEM.conf itself, so that its messages name the job file a user reruns.
    fresh = overwrite or not os.path.exists(files.store)
    # The files a resume relies on, as they were when they were found to hold this job: the
    # program reads them by name later, and another call (overwrite=True) may replace them.
    held = []
    for name, c in ([] if fresh else written_final):
        held.append((name, _holds(os.path.join(files.folder, name), c)))
        if held[-1][1] is None:
            break
    resume = not fresh and all(ident is not None for _, ident in held)
    staged = not fresh and not resume
    tag = f".new{os.getpid()}" if staged else ""
    names = {k: files.data(k, tag) for k in _FILES}
    names["store"] = files.name
    job_name = os.path.basename(files.job) + tag
    if resume:
        written = []
    else:
        job_run = job_final if not staged else \
            _job_text(kernel_fn, a1, a2, kernel, precision, tile, test_test, y, backend, level, progress, names,
                      graph)
        written = [(job_name, job_run)] + [(names[k], a) for k, a in arrays]
    seen = []  # the program's lines, also when it is interrupted
    ours = []
    relied = held  # the files beside the store (name, identity) that this call's result rests on
    try:
        # Each file's identity is taken as its own write leaves it (a snapshot after all the
        # writes would count as this call's a file that another call replaced meanwhile).
        ours = [_write(os.path.join(files.folder, name), content) for name, content in written]
        if not staged and not resume:
            relied = [(name, ident) for (name, _), ident in zip(written, ours)]
        if not staged and None in ours:  # not worth running: the program would read the other call's file
            from .errors import StoreError
            raise StoreError(f"{files.store}: another call on the same store path replaced "
                             f"{written[ours.index(None)][0]} as this call wrote it: run again with "
                             "overwrite=True, one call at a time")
        # A job file named -NAME would be read as an option (-h: the program prints its help).
        args = [f"./{job_name}" if job_name.startswith("-") else job_name] + (["--overwrite"] if overwrite else [])
        nproc = ranks + 1 if ranks is not None and ranks > 1 else None
        with open(files.log, "a", buffering=1) as log:  # line by line: `tail -f` shows the run
            if staged:
                log.write(f"ntkd.batch: {files.name} exists and {os.path.basename(files.job)} differs from this job: "
                          f"the job runs as {job_name}, renamed {os.path.basename(files.job)} once the program "
                          "accepts it for the store\n")
            result = _program.run(args, cwd=files.folder, nproc=nproc, progress=progress, desc=files.name,
                                  log=_Tee(log) if verbose else log, check=False, lines=seen)
    finally:
        accepted = any(_program.ACCEPTED.match(t) for t in seen)
        if staged:  # the store's files: this job's once the program accepted it for the store
            if accepted:
                relied = _adopt(files, written, ours, job_final, tag)
            else:
                _discard(files, written)
        if accepted:  # a test set or labels of the store's previous job
            for k in ("x2", "y1", "y2", "p1", "p2"):
                if k not in dict(arrays) and os.path.exists(os.path.join(files.folder, final[k])):
                    os.unlink(os.path.join(files.folder, final[k]))
    raise_for_exit(result.code, _in_python_words(_program.error_text(result), tag) if result.code else "")
    # On every path (new store, resume, staged), the program read the job file and data by
    # name: if any of them is not the file this call wrote or found holding its job, the program
    # may have run another call's job on the same store path (which may even have finished the
    # store): never return a store that may not hold kernel_fn of this call's data as if it did.
    # Checked after the run, and again once the store is open (with the store's own job text),
    # so that a store replaced after the run is caught too.
    from .errors import StoreError

    def replaced(names):
        return StoreError(f"{files.store}: the data or job beside the store ({', '.join(names)}) were replaced while "
                          "the program ran, by another call on the same store path; the store may hold the kernel "
                          "of that call's data: run again with overwrite=True, one call at a time")

    gone = _replaced(files, relied)
    if gone:
        raise replaced(gone)
    from . import store as _store
    S = _store.open(files.store)
    try:
        why = _job_difference(S, kernel_fn, a1, a2, kernel, precision, test_test, p1, p2)
        gone = _replaced(files, relied)
    except BaseException:
        S.close()
        raise
    if why or gone:
        S.close()
        if gone:
            raise replaced(gone)
        raise StoreError(f"{files.store}: the store is not of this call's job ({why}): it was replaced while the "
                         "program ran, by another call on the same store path: run again with overwrite=True, one "
                         "call at a time")
    return S


# ntkd.batch's own keywords and their defaults, from its signature: what nt.batch's form must leave as they are
_BATCH_DEFAULTS = {k: p.default for k, p in inspect.signature(batch).parameters.items()
                   if k not in ("kernel_fn", "x1", "x2", "unknown")}


def _in_python_words(text, tag):
    """The program's error as this call's caller can act on it: the cure is
    overwrite=True or another store (the program names its --overwrite and
    [output] path), and the files are named as the caller knows them, not by
    the temporary names a staged job ran under (x1.new8244.npy, k.conf.new8244)."""
    text = text.replace("use --overwrite to replace it, or set [output] path to a new file",
                        "pass overwrite=True to replace it, or another store")
    text = text.replace("use --overwrite to replace it", "pass overwrite=True to replace it")
    return text.replace(tag, "") if tag else text


class _Tee:
    """verbose=True: the program's lines into STEM.log and onto this process's stderr. A stderr
    that fails (its reader gone: `python s.py 2>&1 | head`; closed; None) loses the rest of the
    echo, not the job: the program's own rule for its log's reader (docs/CLI.md)."""

    def __init__(self, log):
        self.log = log
        self.echo = True

    def write(self, text):
        self.log.write(text)
        if self.echo:
            try:
                sys.stderr.write(text)
            except (OSError, ValueError, AttributeError):  # a broken pipe, a closed file, no stderr
                self.echo = False

    def flush(self):
        self.log.flush()


def _adopt(files, written, ours, job_final, tag):
    """The job was accepted for the store: its files take the final names. Returns each final
    name with the identity of this call's file there (None where another call's stands there)."""
    relied = []
    for (name, _), mine in zip(written[1:], ours[1:]):
        final = name[:-len(tag + ".npy")] + ".npy"  # Files.data's tag, before the extension
        os.replace(os.path.join(files.folder, name), os.path.join(files.folder, final))
        now = _identity(os.path.join(files.folder, final))  # a rename changes its ctime, not its inode
        relied.append((final, now if now is not None and mine is not None and now[:2] == mine[:2] else None))
    relied.insert(0, (os.path.basename(files.job), _write(files.job, job_final)))
    os.unlink(os.path.join(files.folder, written[0][0]))
    return relied


def _discard(files, written):
    for name, _ in written:
        path = os.path.join(files.folder, name)
        if os.path.exists(path):
            os.unlink(path)
