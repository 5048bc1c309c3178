"""Bad input gives one line naming the valid choices and exit code 2."""
import pytest

from tests.helpers import suite


@pytest.mark.parametrize("args,needle", [
    (["run", "--device", "cpu", "--preset", "cpu", "--workloads", "gelux"], "unknown workload 'gelux'; choose from attention, gelu"),
    (["run", "--device", "cpu", "--preset", "cpu", "--dtypes", "float8"], "unknown dtype 'float8'; choose from float32, float16, bfloat16"),
    (["run", "--device", "cpu", "--preset", "quick"], "use --preset cpu"),
    (["run", "--device", "cpu", "--preset", "cpu", "--impls", "nope"], "unknown implementation 'nope'"),
    (["run", "--device", "cpu", "--preset", "cpu", "--timer", "graph"], "on the CPU use --timer wall"),
    (["run", "--device", "cpu", "--preset", "cpu", "--shard", "3/2"], "expected K/N"),
    (["run", "--device", "cuda"], "no CUDA GPU is visible"),
    (["frobnicate"], "unknown verb 'frobnicate'"),
    (["show", "/nonexistent/x.parquet"], "no readable results"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle):
    r = suite(*args, timeout=120)
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr
    assert "Traceback" not in r.stderr
    assert len([ln for ln in r.stderr.splitlines() if ln.startswith("error:")]) == 1


def test_list_shows_the_matrix_with_reasons():
    r = suite("list", "--device", "cpu", timeout=120)
    assert r.returncode == 0, r.stderr
    for word in ("gelu", "residual_layernorm_gelu", "softmax", "gemm", "attention",
                 "compile:dynamic", "torch:flash", "needs a CUDA GPU"):
        assert word in r.stdout


def test_help_explains_the_verbs_and_run_options():
    r = suite("--help")
    assert r.returncode == 0 and "run" in r.stdout and "compare" in r.stdout
    r = suite("run", "--help")
    assert r.returncode == 0
    for word in ("--preset", "--resume", "--shard", "--timer", "float64"):
        assert word in r.stdout
