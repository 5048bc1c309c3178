"""--plugin: a user's own implementation from a module or a .py file, in the runner and its workers."""
import sys

import pytest
import torch

from suite import store
from suite.workload import REGISTRY, Case, PluginError, import_plugin, plugin_module_name
from tests.helpers import ROOT, suite

EXAMPLE = "examples/my_softmax.py"


@pytest.fixture
def mine(monkeypatch):
    """The example imported in this process, and forgotten afterwards (other tests list the registry)."""
    monkeypatch.chdir(ROOT)
    module = import_plugin(EXAMPLE)
    yield REGISTRY.get("softmax", "triton:mine")
    REGISTRY.remove("softmax", "triton:mine")
    sys.modules.pop(module.__name__, None)


def test_the_example_is_a_correct_masked_softmax(mine):
    assert mine.source == f"plugin:{EXAMPLE}"
    assert mine.check_available("cpu") is None  # tests run Triton under TRITON_INTERPRET=1
    for m, n, dtype in ((3, 1, torch.float32), (5, 3, torch.float32), (7, 781, torch.bfloat16)):
        x = torch.randn(m, n).to(dtype) * 3
        y = mine.fn(x)
        assert y.dtype == dtype and y.shape == x.shape
        torch.testing.assert_close(y.double(), torch.softmax(x.double(), -1), atol=8e-3, rtol=0)
    assert mine.supports(Case.make("softmax", "float32", M=4, N=131072)) == \
        "rows longer than 32768 do not fit one program"
    assert mine.supports(Case.make("softmax", "float32", M=4, N=32768)) is None


def test_a_plugin_file_has_one_module_name_however_it_is_named(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    name = plugin_module_name(EXAMPLE)
    assert name == plugin_module_name(ROOT / EXAMPLE) == plugin_module_name(f"./{EXAMPLE}")
    assert name.isidentifier() and name != plugin_module_name(tmp_path / "my_softmax.py")


def test_a_run_times_a_plugin_file_beside_the_builtin_op(tmp_path):
    out = tmp_path / "mine.parquet"
    # --shard 2/5 of the five float32 cpu shapes: M=5,N=3 (the interpreter runs one program a row)
    r = suite("run", "--device", "cpu", "--preset", "cpu", "--plugin", EXAMPLE, "--workloads", "softmax",
              "--impls", "triton:mine,torch", "--dtypes", "float32", "--shard", "2/5", "--samples", "3,3",
              "--no-progress", "--reuse-ceilings", "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    df = store.read_file(out).set_index("impl")
    assert set(df["shape"]) == {"M=5,N=3"}
    assert df.loc["triton:mine", "status"] == "ok" and df.loc["triton:mine", "correct"]
    assert df.loc["triton:mine", "impl_source"] == f"plugin:{EXAMPLE}"
    assert df.loc["torch", "impl_source"] == "builtin"


def test_list_shows_a_plugin_file():
    r = suite("list", "--device", "cpu", "--plugin", EXAMPLE, timeout=300)
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if "triton:mine" in ln)
    assert "available" in line and f"plugin:{EXAMPLE}" in line


BAD = [(None, "no such file"),
       ("def broken(:\n", "SyntaxError: "),
       ("import a_module_nobody_has\n", "ModuleNotFoundError: No module named 'a_module_nobody_has'"),
       ("raise RuntimeError('needs a licence server')\n", "RuntimeError: needs a licence server")]


@pytest.mark.parametrize("verb, content, reason", [(["list", "--device", "cpu"], *bad) for bad in BAD]
                         + [(["run", "--device", "cpu", "--preset", "cpu"], *BAD[2])])
def test_a_plugin_that_cannot_be_imported_is_one_line_and_exit_2(tmp_path, verb, content, reason):
    path = tmp_path / "plugin.py"
    if content is not None:
        path.write_text(content)
    r = suite(*verb, "--plugin", str(path), timeout=300)
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.startswith(f"error: --plugin {path}: {reason}") and r.stderr.count("\n") == 1, r.stderr


def test_an_unknown_plugin_module_is_one_line():
    with pytest.raises(PluginError, match=r"^--plugin no_such_plugin_module: ModuleNotFoundError"):
        import_plugin("no_such_plugin_module")


def test_every_shipped_implementation_is_builtin():
    # The harness registers the compile backend on each workload's behalf; those
    # rows are the project's own, not a plugin's.
    from suite.workload import discover

    sources = {impl.source for impl in discover().impls.values() if not impl.module or
               not impl.module.startswith("tests")}
    assert sources == {"builtin"}, sources
