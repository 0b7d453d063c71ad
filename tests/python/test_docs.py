"""The documentation's Python examples, run as they stand: every ```python block of
README.md (all in its "From Python" section, which scripts/quickstart.sh runs too), of
docs/MIGRATING.md and of python/README.md, each page's blocks in order as one program, in a
fresh folder.

What they print is checked against what they say they print: a `print(...)` line's
comment must begin with the line the print wrote (`print(x.shape)  # (50, 300) ...`).
Then their results are checked: the README's store against kernel_fn bit for bit and its
two regressions against each other; python/README.md's stores against kernel_fn bit for bit,
its regressions against the formula and each other; MIGRATING.md's kernel and predictions against
neural-tangents' own (tests/data/ref_predict.npz), and its neural-tangents block, where
neural-tangents is installed (NTKD_NT_PYTHON, default /opt/ntkd-ref-venv/bin/python),
run by neural-tangents itself.
"""

import contextlib
import io
import os
import re
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))


def blocks(page, info="python"):
    """(first line number, code) of each ```INFO block of a Markdown page."""
    out, cur, start = [], None, 0
    for n, line in enumerate(open(os.path.join(SRC, page)), 1):
        if cur is None and line.rstrip("\n") == "```" + info:
            cur, start = [], n + 1
        elif cur is not None and line.startswith("```"):
            out.append((start, "".join(cur)))
            cur = None
        elif cur is not None:
            cur.append(line)
    return out


def section(page, title):
    """The line numbers of a page's '## title' section: [first, last]."""
    lines = open(os.path.join(SRC, page)).read().split("\n")
    first = next(i for i, l in enumerate(lines, 1) if l == "## " + title)
    last = next((i - 1 for i, l in enumerate(lines, 1) if i > first and l.startswith("## ")), len(lines))
    return first, last


def expected_prints(code):
    """The comment of each print(...) line, in order."""
    out = []
    for line in code.splitlines():
        m = re.match(r"\s*print\(.*\)\s*#\s*(.*)$", line)
        if m:
            out.append(m.group(1))
        elif re.match(r"\s*print\(", line):
            out.append(None)
    return out


def run_page(page, code, folder):
    """Run one page's code in `folder`; its namespace and what it printed."""
    ns = {"__name__": "__main__"}
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, page, "exec"), ns)
    finally:
        os.chdir(cwd)
    return ns, out.getvalue().splitlines()


def check_prints(page, code, printed):
    want = expected_prints(code)
    assert len(printed) == len(want), f"{page}: {len(printed)} lines printed, {len(want)} print() lines:\n" + \
        "\n".join(printed)
    for got, comment in zip(printed, want):
        if comment is not None:
            assert comment.startswith(got.strip()), f"{page}: printed {got!r}, the comment says {comment!r}"


def program(page, info="python"):
    """A page's ```INFO blocks as one program, each at its own line numbers (tracebacks
    name the page's lines)."""
    found = blocks(page, info)
    assert found, f"{page} has no ```{info} block"
    code = ""
    for start, text in found:
        code += "\n" * (start - 1 - code.count("\n")) + text
    return found, code


def test_readme_blocks_are_the_from_python_section():
    """The quickstart runs the "From Python" section's blocks: they must be all of them."""
    found = blocks("README.md")
    first, last = section("README.md", "From Python")
    assert len(found) >= 3
    for start, _ in found:
        assert first < start <= last, f"README.md:{start}: a python block outside \"From Python\""


def test_readme(tmp_path):
    found, code = program("README.md")
    ns, printed = run_page("README.md", code, tmp_path)
    check_prints("README.md", code, printed)
    x_train, x_test, kernel_fn = ns["x_train"], ns["x_test"], ns["kernel_fn"]
    n1 = len(x_train)
    assert ns["k_test_train"].shape == (len(x_test), n1) and ns["k_test_train"].dtype == np.float64
    assert ns["k32"].dtype == np.float32
    # The store holds kernel_fn's numbers bit for bit (tests/python/run.sh gives this process the
    # program's OpenBLAS kernels), the NNGP too, and the two regressions agree.
    import ntkd_store
    with ntkd_store.open(str(tmp_path / "k.ntk")) as S:
        assert np.array_equal(S["ntk"][n1:, :n1], ns["k_test_train"])
        assert np.array_equal(S["nngp"][:n1, :n1], ns["k"].nngp)
    assert ns["mean"].shape == (len(x_test), 3)
    np.testing.assert_allclose(ns["mean_store"], ns["mean"], rtol=0, atol=1e-12)
    # The regression is the one neural-tangents writes: K_td (K_dd + diag_reg trace/n I)^-1 y.
    k_dd = kernel_fn(x_train, None, "ntk")
    reg = 1e-4 * np.trace(k_dd) / n1
    want = ns["k_test_train"] @ np.linalg.solve(k_dd + reg * np.eye(n1), ns["y_train"])
    np.testing.assert_allclose(ns["mean"], want, rtol=0, atol=1e-8 * np.abs(want).max())


# ---- python/README.md ----------------------------------------------------------------------

def test_python_readme(tmp_path):
    found, code = program("python/README.md")
    assert len(found) == 3, "python/README.md: a block for ntkd.batch, ntkd.predict and ntkd.store"
    ns, printed = run_page("python/README.md", code, tmp_path)
    check_prints("python/README.md", code, printed)
    x_train, x_test, y_train, kernel_fn = ns["x_train"], ns["x_test"], ns["y_train"], ns["kernel_fn"]
    n1, n = len(x_train), len(x_train) + len(x_test)
    # ntkd.batch's stores hold kernel_fn's numbers for x_train then x_test, bit for bit
    # (tests/python/run.sh gives this process the program's OpenBLAS kernels): k.ntk without
    # test x test (NaN), kt.ntk with it; and the page's blocks are those numbers.
    k = kernel_fn(np.concatenate([x_train, x_test]), None, ("nngp", "ntk"))
    import ntkd_store
    with ntkd_store.open(str(tmp_path / "k.ntk")) as S:
        assert S.shape == (n, n) and S.n_train == n1 and S.complete
        for g in ("nngp", "ntk"):
            assert np.array_equal(S[g][:, :n1], getattr(k, g)[:, :n1]), g
        assert np.isnan(S["ntk"][n1:, n1:]).all()
    with ntkd_store.open(str(tmp_path / "kt.ntk")) as S:
        assert S.complete and S.test_test
        for g in ("nngp", "ntk"):
            assert np.array_equal(S[g][:, :], getattr(k, g)), g
    assert np.array_equal(ns["K"], k.ntk[:100, n1:])
    np.testing.assert_allclose(ns["y"], k.ntk @ ns["v"], rtol=1e-12)
    assert ns["tiles"] == ns["report"].intact == ns["report"].needed and ns["report"]
    # The resume computed nothing, and the job it ran is k.conf (the file beside the store).
    log = (tmp_path / "k.log").read_text()
    assert re.findall(r"^ntkd: (\d+) of 9 tiles to compute", log, re.M) == ["9", "0"]
    assert ".new" not in log
    # The regressions are the one neural-tangents writes: K_td (K_dd + diag_reg trace/n I)^-1 y,
    # in this process and from the store; the covariances are (m, m).
    assert ns["mean"].shape == ns["mean_nngp"].shape == ns["mean_store"].shape == (len(x_test), 3)
    assert ns["cov_nngp"].shape == ns["g"].ntk.covariance.shape == (len(x_test), len(x_test))
    k_dd = k.ntk[:n1, :n1]
    reg = 1e-4 * np.trace(k_dd) / n1
    want = k.ntk[n1:, :n1] @ np.linalg.solve(k_dd + reg * np.eye(n1), y_train)
    tol = 1e-8 * np.abs(want).max()
    np.testing.assert_allclose(ns["mean"], want, rtol=0, atol=tol)
    np.testing.assert_allclose(ns["mean_store"], want, rtol=0, atol=tol)
    np.testing.assert_allclose(ns["g"].ntk.mean, ns["mean_store"], rtol=0, atol=0)
    # during training: the linearised network from 0 is the ensemble's mean (no ridge), and the
    # largest learning rate is 2 n / the NTK's largest eigenvalue
    assert ns["means"].shape == (4, len(x_test), 3)
    from ntkd import predict
    ens = predict.gradient_descent_mse_ensemble(kernel_fn, x_train, y_train, learning_rate=ns["lr"])
    want = ens(100., x_test, "ntk")
    np.testing.assert_allclose(ns["fx_test_t"], want, rtol=0, atol=1e-10 * np.abs(want).max())
    assert np.isclose(ns["lr"], 2 * n1 / np.linalg.eigvalsh(k_dd)[-1], rtol=1e-12)
    # under the cross-entropy loss the train loss falls from log 3 (outputs 0) as time goes on
    def cross_entropy(f):
        f = f - f.max(axis=1, keepdims=True)
        return -np.mean((f - np.log(np.exp(f).sum(axis=1, keepdims=True))) * ns["onehot"])
    losses = [np.log(3) / 3] + [cross_entropy(f) for f in ns["fx_t"]]
    assert losses[0] > losses[1] > losses[2], losses


# ---- docs/MIGRATING.md ---------------------------------------------------------------------

NT_PYTHON = os.environ.get("NTKD_NT_PYTHON", "/opt/ntkd-ref-venv/bin/python")
REF_PREDICT = os.path.join(SRC, "tests", "data", "ref_predict.npz")


def code_lines(text, drop=()):
    """A block's lines without comments and blank lines, less those containing a word of `drop`."""
    out = []
    for line in text.splitlines():
        line = re.sub(r"\s+#.*$", "", line).rstrip()
        if line and not line.lstrip().startswith("#") and not any(w in line for w in drop):
            out.append(line)
    return out


def test_migrating_step2_is_step1_with_the_import_changed():
    """The page says step 2 is neural-tangents' step 1 with one changed import (and its JAX
    lines dropped): it is, line for line."""
    (_, nt_code), = blocks("docs/MIGRATING.md", "python neural-tangents")
    _, ntkd_code = blocks("docs/MIGRATING.md")[0]
    want = [l.replace("from neural_tangents import", "from ntkd import") for l in code_lines(nt_code, ["jax"])]
    assert code_lines(ntkd_code) == want
    assert sum("neural_tangents" in l for l in code_lines(nt_code)) == 1


def test_migrating(tmp_path):
    found, code = program("docs/MIGRATING.md")
    ns, printed = run_page("docs/MIGRATING.md", code, tmp_path)
    check_prints("docs/MIGRATING.md", code, printed)
    # The example's data are neural-tangents' reference inputs, and its kernel and
    # prediction neural-tangents' own (float64, scripts/nt_predict_reference.py).
    R = np.load(REF_PREDICT)
    for name in ("x_train", "x_test", "y_train"):
        assert np.array_equal(ns[name], R[name]), name
    def rel(got, want):
        return np.abs(got - want).max() / np.abs(want).max()
    assert rel(ns["k_test_train"], R["k_td_ntk"]) < 1e-12
    assert rel(ns["mean"], R["gd_ntk_mean"]) < 1e-8
    assert rel(ns["mean_store"], R["gd_ntk_mean"]) < 1e-8


@pytest.mark.skipif(not os.access(NT_PYTHON, os.X_OK), reason=f"neural-tangents not installed ({NT_PYTHON})")
def test_migrating_step1_with_neural_tangents(tmp_path):
    """Step 1 is neural-tangents' code that runs: it prints what its comments say (the
    comments of step 2, which prints the same)."""
    (start, nt_code), = blocks("docs/MIGRATING.md", "python neural-tangents")
    script = tmp_path / "migrating_step1.py"
    script.write_text("\n" * (start - 1) + nt_code)
    env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("PYTHONPATH", None)
    r = subprocess.run([NT_PYTHON, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    check_prints("docs/MIGRATING.md (neural-tangents)", nt_code, r.stdout.splitlines())
