"""--shape, --shapes FILE and --preset llm: parsing, errors, memory, shape_source."""
import re

import pytest

from suite import cli, shapes, store
from suite.args import UsageError
from suite.runner import make_plan
from suite.workload import discover
from tests.helpers import suite, suite_here

REG = discover()
WL = REG.workloads


def plan(*argv):
    return make_plan(cli.build_parser("run").parse_args(["run", "--device", "cpu", *argv]), REG)


def labels(cases):
    return [(c.workload, c.label, c.dtype) for c in cases]


def test_a_shape_goes_to_the_named_workloads_in_their_key_order():
    cases = shapes.cli_cases(["N=5000,M=3000"], WL, ["softmax"], ["bfloat16"])
    assert labels(cases) == [("softmax", "M=3000,N=5000", "bfloat16")]
    assert {c.source for c in cases} == {"cli"}


def test_without_workloads_a_shape_goes_to_every_workload_with_exactly_its_keys():
    cases = shapes.cli_cases(["M=7,N=33", "N=9"], WL, None, ["float32"])
    assert labels(cases) == [("residual_layernorm_gelu", "M=7,N=33", "float32"),
                             ("softmax", "M=7,N=33", "float32"), ("gelu", "N=9", "float32")]
    # no --dtypes: every dtype the workload has
    assert {c.dtype for c in shapes.cli_cases(["N=9"], WL, None, None)} == set(WL["gelu"].dtypes)


@pytest.mark.parametrize("text,value", [("1", 1), ("0", 0), ("true", 1), ("False", 0)])
def test_causal_takes_0_1_true_false(text, value):
    (case,) = shapes.cli_cases([f"B=1,H=2,S=3,D=64,causal={text}"], WL, ["attention"], ["float32"])
    assert case["causal"] == value


def _write(tmp_path, text, name="shapes.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_file_sweeps_the_product_of_its_lists(tmp_path):
    path = _write(tmp_path, """
[softmax]
M = [4096, 7]
N = [32000, 50257, 128256]
dtypes = ["bfloat16"]

[[gemm]]
M = [1, 16]
N = 64
K = 32

[[gemm]]
M = 3
N = 5
K = 7
dtypes = "float32"
""")
    cases = shapes.file_cases(path, WL, None, None)
    soft = [c for c in cases if c.workload == "softmax"]
    assert sorted(c.label for c in soft) == sorted(f"M={m},N={n}" for m in (4096, 7)
                                                   for n in (32000, 50257, 128256))
    assert {c.dtype for c in soft} == {"bfloat16"}
    gemm = [(c.label, c.dtype) for c in cases if c.workload == "gemm"]
    assert len(gemm) == 2 * len(WL["gemm"].dtypes) + 1 and ("M=3,N=5,K=7", "float32") in gemm
    assert {c.source for c in cases} == {f"file:{path}"}
    # --dtypes overrides the tables' own; --workloads keeps only its tables
    only = shapes.file_cases(path, WL, ["gemm"], ["float16"])
    assert {c.workload for c in only} == {"gemm"} and {c.dtype for c in only} == {"float16"}


def test_the_example_file_loads():
    cases = shapes.file_cases("examples/shapes.toml", WL, None, None)
    assert {c.workload for c in cases} == {"softmax", "gemm", "attention"}
    assert {c["causal"] for c in cases if c.workload == "attention"} == {0, 1}


def test_a_shape_that_would_not_fit_is_refused_before_allocation(monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("inputs allocated")

    monkeypatch.setattr(type(WL["gelu"]), "make_inputs", never)
    monkeypatch.setattr(shapes, "free_memory", lambda device: 2**30)
    # float32 N: N * 4 bytes in, the same out, both again in float64: 24 N bytes
    assert WL["gelu"].memory_bytes(shapes.cli_cases(["N=1000"], WL, ["gelu"], ["float32"])[0]) == 24_000
    fits = plan("--workloads", "gelu", "--shape", f"N={2**30 // 24}", "--dtypes", "float32")
    assert [c.label for c, _ in fits.cases] == [f"N={2**30 // 24}"]
    with pytest.raises(UsageError, match=r"need about 1\.0 GiB and the host has 1\.0 GiB free"):
        plan("--workloads", "gelu", "--shape", f"N={2**30 // 24 + 100}", "--dtypes", "float32")
    # bfloat16 holds less, so the same N fits there
    assert plan("--workloads", "gelu", "--shape", f"N={2**30 // 24 + 100}", "--dtypes", "bfloat16").cases


def test_shapes_run_alone_or_after_the_preset_and_once():
    alone = plan("--workloads", "softmax", "--shape", "M=5,N=3", "--dtypes", "float32")
    assert alone.preset is None and [c.label for c, _ in alone.cases] == ["M=5,N=3"]
    both = plan("--preset", "cpu", "--workloads", "softmax", "--shape", "M=5,N=3", "--shape", "M=2,N=2",
                "--dtypes", "float32")
    got = [(c.label, c.source) for c, _ in both.cases]
    assert ("M=5,N=3", "preset:cpu") in got and ("M=5,N=3", "cli") not in got  # in the preset already
    assert got[-1] == ("M=2,N=2", "cli") and len(got) == len(WL["softmax"].presets["cpu"]) + 1


def test_the_llm_preset_has_model_shapes_for_every_workload():
    for name, wl in WL.items():
        cases = wl.cases("llm")
        assert 6 <= len(cases) <= 10, name
        assert {c.dtype for c in cases} == {"bfloat16"} and {c.source for c in cases} == {"preset:llm"}
    vocab = [c["N"] for c in WL["softmax"].cases("llm") if c["N"] >= 32000]
    assert len(set(vocab)) >= 4 and all(32000 <= n <= 152064 for n in vocab)
    assert {32000, 50257, 128256, 152064} <= set(vocab)
    ms = [c["M"] for c in WL["gemm"].cases("llm")]
    decode = [m for m in ms if m < 1024]
    assert decode and all(1 <= m <= 16 for m in decode) and 1 in decode
    # attention at the models' head dims, Phi-3's 96 among them: every one runs
    # on our Triton and CUDA kernels
    cases = WL["attention"].cases("llm")
    assert {64, 96, 128} <= {c["D"] for c in cases}
    for impl in ("triton", "cuda"):
        assert all(REG.get("attention", impl).supports(c) is None for c in cases), impl
    assert all(c["causal"] == 1 for c in WL["attention"].cases("llm"))


ERRORS = [
    (["--workloads", "softmax", "--shape", "M=3,N=4,K=5"], "softmax has no dimension 'K'; its keys are M, N"),
    (["--workloads", "softmax", "--shape", "N=5"], "softmax needs M too"),
    (["--workloads", "gelu", "--shape", "N=0"], "N must be a positive integer, not '0'"),
    (["--workloads", "gelu", "--shape", "N=2.5"], "N must be a positive integer, not '2.5'"),
    (["--workloads", "gelu,softmax", "--shape", "N=1000"],
     "the workloads take different shape keys (gelu: N; softmax: M, N)"),
    (["--shape", "X=1"], "no workload takes exactly the keys X; attention: B, H, S, D, causal; gelu: N;"),
    (["--workloads", "attention", "--shape", "B=1,H=1,S=8,D=64,causal=2"], "causal must be 0 or 1"),
    (["--workloads", "gelu", "--shape", f"N={10**15}"], "use a smaller shape"),
    (["--shapes", "{tmp}/missing.toml"], "missing.toml: No such file"),
    (["--shapes", "{tmp}/bad.toml"], "bad.toml: not valid TOML"),
    (["--shapes", "{tmp}/workload.toml"], "workload.toml [sofmax]: unknown workload"),
    (["--shapes", "{tmp}/key.toml"], "key.toml [[gemm]] #2: gemm has no dimension 'Q'"),
    (["--shapes", "{tmp}/value.toml"], "value.toml [softmax] N: N must be a positive integer, not -3"),
    (["--shapes", "{tmp}/dtype.toml"], "dtype.toml [gelu] dtypes: unknown dtype 'float8'"),
    (["--shapes", "{tmp}/latin1.toml"], "latin1.toml: not UTF-8 text"),
]
FILES = {
    "bad.toml": "[softmax\nM = 1\n",
    "workload.toml": "[sofmax]\nM = 1\nN = 2\n",
    "key.toml": "[[gemm]]\nM = 1\nN = 2\nK = 3\n[[gemm]]\nM = 1\nN = 2\nK = 3\nQ = 4\n",
    "value.toml": "[softmax]\nM = [1]\nN = [2, -3]\n",
    "dtype.toml": '[gelu]\nN = 8\ndtypes = ["float8"]\n',
    "latin1.toml": "# caf\xe9\n[gelu]\nN = 8\n".encode("latin-1"),  # TOML is UTF-8; this is not
}


@pytest.mark.parametrize("text", ["1_000", "+5", "\u0663", "\uff15", "0x10"])
def test_a_size_is_plain_ascii_digits(text):
    """int() also reads 1_000, +5 and digits of other scripts (Arabic-Indic 3, fullwidth 5): a
    typo or a pasted character would run as a shape nobody wrote; only 0-9 are a size."""
    with pytest.raises(UsageError, match=re.escape(f"N must be a positive integer, not '{text}'")):
        shapes.cli_cases([f"N={text}"], WL, ["gelu"], ["float32"])
    assert [c["N"] for c in shapes.cli_cases(["N=1000"], WL, ["gelu"], ["float32"])] == [1000]


@pytest.mark.parametrize("args,needle", ERRORS, ids=[e[1][:40] for e in ERRORS])
def test_bad_shapes_are_one_line_and_exit_2(tmp_path, args, needle):
    for name, text in FILES.items():
        if isinstance(text, bytes):
            (tmp_path / name).write_bytes(text)
        else:
            _write(tmp_path, text, name)
    r = suite_here("run", "--device", "cpu", *[a.format(tmp=tmp_path) for a in args])
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.startswith("error: ") and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert needle in r.stderr


def test_rows_record_where_their_shape_came_from_and_resume_keeps_them(tmp_path):
    out = tmp_path / "run.parquet"
    args = ["run", "--device", "cpu", "--workloads", "softmax", "--impls", "eager", "--shape", "M=7,N=33",
            "--preset", "cpu", "--dtypes", "float32", "--no-progress", "--samples", "3,3",
            "--reuse-ceilings"]
    r = suite(*args, "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    df = store.read_file(out)
    assert (df["status"] == "ok").all()
    src = dict(zip(df["shape"], df["shape_source"]))
    assert src.pop("M=7,N=33") == "cli" and set(src.values()) == {"preset:cpu"}
    assert (df.loc[df["shape"] == "M=7,N=33", ["shape_M", "shape_N"]].values == [7, 33]).all()
    r = suite(*args, "--resume", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    again = store.read_file(out)
    assert len(again) == len(df) and again["shape_source"].tolist() == df["shape_source"].tolist()
