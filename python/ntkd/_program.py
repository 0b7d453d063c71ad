"""The ntkd program from Python: where it is, how it is started (one process,
or under mpirun with the settings of scripts/env.sh), its progress lines
(src/coordinator/progress.c) fed to a bar, Ctrl-C passed on as the stop
signal docs/CLI.md names, and its exit codes raised as exceptions.

Used by ntkd.batch (computing a store) and ntkd.predict (``ntkd solve``)."""

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys

import numpy as np

from .errors import raise_for_exit

_here = os.path.dirname(os.path.abspath(__file__))

# scripts/env.sh: Open MPI as root, more ranks than cores, containers. Values
# already in the environment win, as there.
MPI_ENV = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_rmaps_base_oversubscribe": "1",
    "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
}

# The coordinator's lines (src/coordinator/coordinator.c, progress.c).
_TO_COMPUTE = re.compile(r"^ntkd: (\d+) of (\d+) tiles to compute\b")
ACCEPTED = _TO_COMPUTE  # the job was accepted for its store: the coordinator starts
_PROGRESS = re.compile(r"^ntkd: (\d+)/(\d+) tiles \(")
_FINISHED = re.compile(r"^ntkd: (?:done|stopped|failed): (\d+)/(\d+) tiles in the store\b")


def program():
    """The ntkd program: $NTKD_PROGRAM, else the one installed in the package
    (ntkd/bin/ntkd, by `pip install ./python`), else `ntkd` on the PATH."""
    env = os.environ.get("NTKD_PROGRAM")
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise FileNotFoundError(f"NTKD_PROGRAM={env} is not an executable file")
        return env
    mine = os.path.join(_here, "bin", "ntkd")
    if os.path.isfile(mine) and os.access(mine, os.X_OK):
        return mine
    found = shutil.which("ntkd")
    if found:
        return found
    raise FileNotFoundError(
        "the ntkd program was not found: not in the package (ntkd/bin/ntkd, installed by `pip install ./python`), "
        "not on the PATH; set NTKD_PROGRAM to its path (build/ntkd in a source tree)")


def mpirun():
    """The MPI launcher: $NTKD_MPIRUN (a command line, e.g. 'mpirun --bind-to none'), else mpirun."""
    cmd = shlex.split(os.environ.get("NTKD_MPIRUN", "mpirun"))
    if not cmd or not shutil.which(cmd[0]):
        raise FileNotFoundError(f"{cmd[0] if cmd else 'NTKD_MPIRUN'}: no MPI launcher found for ranks > 1 (Open MPI's "
                                "mpirun; set NTKD_MPIRUN to another)")
    return cmd


def check_int(v, what, low, high=None):
    """None, or an integer from low to high (no bound above when high is None)."""
    if v is None:
        return None
    if isinstance(v, np.integer):
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{what} must be an integer or None, not {v!r}")
    if high is None and v < low:
        raise ValueError(f"{what} must be at least {low}, not {v}")
    if high is not None and not low <= v <= high:
        raise ValueError(f"{what} must be from {low} to {high}, not {v}")
    return v


def check_ranks(ranks, what):
    """None, or an integer >= 1."""
    return check_int(ranks, f"{what}: ranks", 1)


def check_progress(progress):
    if not (progress is None or isinstance(progress, bool) or callable(progress)):
        raise TypeError(f"progress must be True, False, None or a callable(done, total), not {progress!r}")


class Tracker:
    """Feeds a progress callable (done, total) or a tqdm bar from the program's lines."""

    def __init__(self, progress, desc):
        self.callback = None
        self.bar = None
        if progress is True:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                return
            self.bar = tqdm(total=None, unit="tile", desc=desc, leave=True)
        elif callable(progress):
            self.callback = progress
        else:
            check_progress(progress)

    @property
    def active(self):
        return self.bar is not None or self.callback is not None

    def line(self, text):
        if not self.active:
            return
        m = _TO_COMPUTE.match(text)
        if m:
            todo, total = int(m.group(1)), int(m.group(2))
            self._set(total - todo, total)
            return
        m = _PROGRESS.match(text) or _FINISHED.match(text)
        if m:
            self._set(int(m.group(1)), int(m.group(2)))

    def _set(self, done, total):
        if self.callback is not None:
            self.callback(done, total)  # its exception stops the job: the caller's way to stop it
        if self.bar is not None:
            try:
                if self.bar.total != total:
                    self.bar.total = total
                self.bar.update(done - self.bar.n)
            except (OSError, ValueError):  # the bar's stderr failed (its reader gone): the bar, not the job
                self.bar = None

    def close(self):
        if self.bar is not None:
            try:
                self.bar.close()
            except (OSError, ValueError):
                pass


def _error_text(lines, code):
    """The program's error line(s): from its first `error:` line to the end, else its last lines."""
    for i, text in enumerate(lines):
        if "error:" in text:
            return "\n".join(t for t in lines[i:] if not _PROGRESS.match(t))
    tail = [t for t in lines if t.strip()][-5:]
    return "\n".join(tail) if tail else f"ntkd exited with code {code} and printed nothing"


class Result:
    """What a run left: its exit code and every line it printed."""

    def __init__(self, code, lines):
        self.code = code
        self.lines = lines

    def has(self, pattern):
        return any(re.search(pattern, t) for t in self.lines)


def run(args, cwd, nproc=None, progress=None, desc=None, log=None, check=True, lines=None):
    """Run `ntkd ARGS...` in folder cwd (under `mpirun -np NPROC` when nproc is
    given) and wait for it. Its stdout and stderr are read line by line: each
    goes to log (an open text file, or None), progress lines to the bar.
    Ctrl-C (KeyboardInterrupt), or an exception of the progress callable,
    sends the job its stop signal (SIGINT to one process, SIGUSR1 to mpirun,
    which forwards it to every rank: docs/CLI.md, "Stopping a job"), waits
    until it has stored what was in flight, and raises that exception again;
    a second Ctrl-C kills it (the stored tiles are kept).
    A failure raises the exception for its exit code with its error line,
    unless check is False. Returns a Result; `lines` (a list) receives the
    lines as they come, also when the run is interrupted."""
    cmd = [program()] + list(args)
    env = dict(os.environ)
    if nproc is not None:
        cmd = mpirun() + ["-np", str(nproc)] + cmd
        for k, v in MPI_ENV.items():
            env.setdefault(k, v)
    tracker = Tracker(progress, desc)
    lines = [] if lines is None else lines
    # A session of its own: Ctrl-C in a terminal reaches this process only,
    # which passes on one stop signal (a second one would change nothing for
    # ntkd, but mpirun exits at once on a repeated SIGINT). And the same stop
    # signal when this process dies (SIGTERM, a closed terminal, a notebook
    # kernel restarted, SIGKILL): the job in its own session ran on, holding
    # the store, and a rerun was refused as "in use" until it ended.
    stop = signal.SIGUSR1 if nproc is not None else signal.SIGINT
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True, text=True, errors="replace",
                                bufsize=1, preexec_fn=_stop_with_parent(stop))
    except BaseException:
        tracker.close()
        raise

    def pump(track):
        for text in proc.stdout:
            text = text.rstrip("\n")
            lines.append(text)
            if log is not None:
                log.write(text + "\n")
            if track:
                tracker.line(text)

    error = None
    try:
        try:
            pump(True)
        except BaseException as e:  # Ctrl-C, or the progress callable failed: stop the job cleanly
            error = e
            if proc.poll() is None:
                proc.send_signal(stop)
            try:
                pump(False)  # it stores what is in flight, then exits 5
            except BaseException:  # a second Ctrl-C: no more waiting (the stored tiles are kept)
                proc.kill()
    finally:
        code = proc.wait()
        proc.stdout.close()
        tracker.close()
        if log is not None:
            log.flush()
    if error is not None:
        raise error
    result = Result(code, lines)
    if code and check:
        raise_for_exit(code, _error_text(lines, code))
    return result


def _stop_with_parent(sig):
    """For Popen's preexec_fn (Linux): the child gets `sig` when this process
    (the thread that started it, which waits for it) dies. None elsewhere.
    The function runs between fork and exec and calls only C functions
    resolved here, beforehand, and os.getppid/os.kill: no lock another
    thread could hold. (A preexec_fn makes subprocess fork rather than
    vfork: a cost once per job.)"""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        prctl, handler = libc.prctl, libc.signal
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    handler.argtypes, handler.restype = [ctypes.c_int, ctypes.c_void_p], ctypes.c_void_p
    parent, number = os.getpid(), int(sig)

    def preexec():
        # The signal's default action until the exec: Python's SIGINT handler, inherited by the
        # fork, would take a signal that came before it and drop it, and the job would run on.
        handler(number, None)  # SIG_DFL
        prctl(1, number, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # died before the prctl: nothing would tell the child
            os.kill(os.getpid(), number)
    return preexec


def error_text(result):
    return _error_text(result.lines, result.code)
