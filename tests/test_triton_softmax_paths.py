"""The Triton softmax's 16-byte granule rows (GRANULES), its 16-bit rows read
as 32-bit pairs (PAIRS) and the rows/split race at 8192 < N <= 32768.

On the CPU (TRITON_INTERPRET=1): the granule form at small irregular shapes in
every dtype, every autotuning candidate of the rows kernel and of the split
kernel launched as the autotuner would, the race's bookkeeping with fake
timings, and (no GPU needed) the sm_90 code of the granule candidates (16-byte
loads and stores) and of the split candidates (no spills).  On the GPU: the
autotuned kernel at the shapes that missed 0.90 of copy and a few irregular
ones, and every candidate forced once.  Outputs start poisoned (NaN), so an
element no kernel writes fails the check.
"""
from __future__ import annotations

import random

import pytest
import torch

from suite import verify
from suite.workload import Case, discover
from tests.helpers import check_softmax, compile_for_sm90

DTYPES = ("float32", "float16", "bfloat16")
cpu_only = pytest.mark.skipif(torch.cuda.is_available(), reason="interpreter tests; the GPU ones are below")


@pytest.fixture
def poisoned(monkeypatch):
    real = torch.empty_like
    monkeypatch.setattr(torch, "empty_like", lambda t, *a, **k: verify.poison_(real(t, *a, **k)))


def _inputs(m: int, n: int, dtype: str, device: str, seed: int):
    wl = discover().workloads["softmax"]
    case = Case.make("softmax", dtype, M=m, N=n)
    inputs = wl.make_inputs(case, device, seed)
    return wl, case, inputs


def _assert_ok(y, wl, case, inputs, what) -> None:
    res = verify.check_case(wl, case, y, wl.reference(case, inputs), inputs=inputs)
    assert res.correct, f"{case} {what}: {res.message}"


def _launch(sm, x, y, c: dict, mode: int | None = None) -> None:
    """One candidate as the autotuner launches it (split: MODE 0 on the GPU, 1 then 2 interpreted)."""
    import triton

    m, n = x.numel() // x.shape[-1], x.shape[-1]
    bucket = triton.next_power_of_2(m)
    if c["kernel"] == "rows":
        sm._softmax_rows[(triton.cdiv(m, c["ROWS"]),)](
            x, y, m, n, bucket, ROWS=c["ROWS"], BLOCK_N=c["BLOCK_N"], EVICT=c["EVICT"],
            GRANULES=c.get("GRANULES", False), PAIRS=c.get("PAIRS", False), LANES=c.get("LANES", 0),
            ALIGN=c.get("ALIGN", 1), num_warps=c["num_warps"])
        return
    p_max = triton.next_power_of_2(triton.cdiv(n, sm.SPLIT_MIN_CHUNK))
    stats = torch.empty(m * 2 * p_max, device=x.device, dtype=torch.float32)
    count = torch.zeros(m + 1, device=x.device, dtype=torch.int32)
    for md in ((mode,) if mode is not None else (1, 2)):
        sm._softmax_split[(m * triton.cdiv(n, c["BLOCK"]),)](
            x, y, stats, count, n, bucket, BLOCK=c["BLOCK"], SUB=c["SUB"], P_MAX=p_max, MODE=md,
            EVICT=c["EVICT"], PAIRS=c.get("PAIRS", False), GRANULES=c.get("GRANULES", False),
            num_warps=c["num_warps"],
            **({"maxnreg": c["maxnreg"]} if "maxnreg" in c else {}))


@cpu_only
@pytest.mark.parametrize("dtype", DTYPES)
def test_granule_rows_irregular(dtype, poisoned):
    impl = discover().get("softmax", "triton")
    for m in (1, 3, 17):
        for n in (1, 3, 7, 9, 61, 781, 2053):
            wl, case, inputs = _inputs(m, n, dtype, "cpu", seed=m * 7919 + n)
            _assert_ok(impl.fn(**inputs, granules=True), wl, case, inputs, "granules")


@cpu_only
def test_granule_rows_minus_inf(poisoned):
    """Rows of -inf but for one element, that element in the head, the body or the tail."""
    from implementations.softmax import triton as sm

    x = torch.full((5, 2053), float("-inf"), dtype=torch.bfloat16)
    for r, c in enumerate((0, 3, 1000, 2050, 2052)):
        x[r, c] = 1.5
    y = sm.softmax_triton(x, granules=True)
    assert check_softmax(y, x).correct


# numpy warns of the row max's -inf - -inf: that NaN is the answer here
@cpu_only
@pytest.mark.filterwarnings("ignore:invalid value encountered in subtract:RuntimeWarning")
@pytest.mark.parametrize("dtype", ("float32", "bfloat16"))
def test_rows_of_minus_inf_are_nan_on_every_path(dtype, monkeypatch):
    """A row of -inf alone has no softmax: NaN from every kernel and form, as
    from torch and the float64 reference, with the rows beside it correct.
    Outputs start at 0.25, so a NaN is one a kernel wrote."""
    real = torch.empty_like
    monkeypatch.setattr(torch, "empty_like", lambda t, *a, **k: real(t, *a, **k).fill_(0.25))
    impl = discover().get("softmax", "triton")
    paths = [(3, 781, {}), (4, 4096, {}), (5, 7, {}), (3, 2053, {"granules": True}),
             (3, 4099, {"max_fused": 1, "block": 1024, "long_rows": "split2"}),
             (4, 1003, {"granules": True, "max_fused": 1, "block": 128, "long_rows": "split2"})]
    if dtype == "bfloat16":
        paths += [(3, 4096, {"pairs": True}), (3, 4112, {"pairs": True, "max_fused": 2048, "block": 1024})]
    for m, n, options in paths:
        wl, case, inputs = _inputs(m, n, dtype, "cpu", seed=m * 37 + n)
        x = inputs["x"]
        x[1] = float("-inf")
        y = impl.fn(**inputs, **options)
        assert y[1].isnan().all(), f"{case} {options}: a row of -inf gave numbers"
        keep = torch.arange(m) != 1
        kept = Case.make("softmax", dtype, M=m - 1, N=n)
        res = verify.check_case(wl, kept, y[keep], torch.softmax(x[keep].double(), -1), impl, {"x": x[keep]})
        assert res.correct, f"{case} {options}, rows beside the -inf one: {res.message}"


@cpu_only
@pytest.mark.parametrize("dtype", DTYPES)
def test_granule_split_chunks(dtype, poisoned):
    """The split kernel's granule chunks (two launches interpreted): rows that
    start anywhere in a granule, a body shorter than one chunk, a ragged last
    chunk, an empty one, a row shorter than a granule, and rows of -inf but
    for one element in the head, the body or the tail."""
    from implementations.softmax import triton as sm

    impl = discover().get("softmax", "triton")
    for m, n, block in ((7, 1000, 64), (5, 4099, 1024), (3, 67, 16), (4, 5, 16), (9, 139, 64), (2, 1030, 512)):
        wl, case, inputs = _inputs(m, n, dtype, "cpu", seed=m * 131 + n)
        _assert_ok(impl.fn(**inputs, granules=True, max_fused=1, block=block, long_rows="split2"), wl, case,
                   inputs, f"split granules {m}x{n}/{block}")
    x = torch.full((5, 1003), float("-inf"), dtype=getattr(torch, dtype))
    for r, c in enumerate((0, 2, 500, 1000, 1002)):
        x[r + 0, c] = 1.5
    y = sm.softmax_triton(x, granules=True, max_fused=1, block=128, long_rows="split2")
    assert check_softmax(y, x).correct
    with pytest.raises(ValueError, match="granule form holds"):
        sm.plan(4, 4099, 4, max_fused=1, block=1024, long_rows="split", sub=256, granules=True)


@cpu_only
@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
def test_pairs_rows_interpreted(dtype, poisoned):
    """The PAIRS form (16-bit rows read as 32-bit words of two elements) at
    widths of a multiple of 16, padded up to the block or not, and with -inf."""
    impl = discover().get("softmax", "triton")
    for m, n in ((1, 16), (3, 48), (5, 160), (2, 4096), (7, 1040)):
        wl, case, inputs = _inputs(m, n, dtype, "cpu", seed=m * 31 + n)
        inputs["x"][0, :-1] = float("-inf")  # one finite element: it gets all the mass
        inputs["x"][-1, 5] = float("-inf")
        _assert_ok(impl.fn(**inputs, pairs=True), wl, case, inputs, "pairs")
    # the split kernel's PAIRS chunks (two launches interpreted): a ragged last chunk, a chunk of -inf
    for m, n, block in ((3, 4112, 1024), (2, 65552, 16384)):
        wl, case, inputs = _inputs(m, n, dtype, "cpu", seed=n)
        inputs["x"][1, :1024] = float("-inf")
        _assert_ok(impl.fn(**inputs, pairs=True, max_fused=2048, block=block), wl, case, inputs, "split pairs")


@cpu_only
def test_pairs_refuses_what_it_cannot_read():
    from implementations.softmax import triton as sm

    for dtype, n in ((torch.float32, 64), (torch.bfloat16, 40), (torch.float16, 7)):
        with pytest.raises(ValueError, match="pairs"):
            sm.softmax_triton(torch.zeros(2, n, dtype=dtype), pairs=True)
    pairs = [c for c in sm.candidates(4096, 32768, 2) if c.get("PAIRS")]
    assert [c["num_warps"] for c in pairs] == [16, 32]
    assert not [c for c in sm.candidates(4096, 32768, 4) + sm.candidates(64, 30001, 2) if c.get("PAIRS")]


@cpu_only
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_rows_candidate_at_unaligned_widths(dtype, poisoned):
    """Each candidate, element-masked and granule, at widths whose rows start anywhere in a granule."""
    from implementations.softmax import triton as sm

    for m, n in ((9, 2053), (5, 781), (6, 100), (3, 7)):
        wl, case, inputs = _inputs(m, n, dtype, "cpu", seed=m + n)
        x = inputs["x"]
        cands = sm.candidates(m, n, x.element_size())
        assert {c["GRANULES"] for c in cands} == {False, True}
        for c in cands:
            y = torch.empty_like(x)
            _launch(sm, x, y, c)
            _assert_ok(y, wl, case, inputs, c)


@cpu_only
@pytest.mark.parametrize("dtype", ("float32", "bfloat16"))
def test_every_split_candidate_at_mid_widths(dtype, poisoned):
    """The split kernel's candidates where it is raced against the rows kernel (two launches here)."""
    from implementations.softmax import triton as sm

    m, n = 2, 16387
    assert sm.split_tried(n) and sm.split_tried(32768) and not sm.split_tried(8192)
    wl, case, inputs = _inputs(m, n, dtype, "cpu", seed=n)
    x = inputs["x"]
    cands = sm.split_candidates(m, n, x.element_size())
    assert cands and all(c["kernel"] == "split" and c["BLOCK"] < 16387 for c in cands)
    for c in cands:
        y = torch.empty_like(x)
        _launch(sm, x, y, c)
        _assert_ok(y, wl, case, inputs, c)


@cpu_only
def test_plan_and_candidates_name_the_granule_form():
    from implementations.softmax import triton as sm

    assert sm.plan(65521, 2053, 2)["GRANULES"] is False  # the measured form is the plan
    assert sm.plan(65521, 2053, 2, granules=True)["BLOCK_N"] == 2048  # body only: 2053 // 8 * 8 = 2048
    assert sm.plan(65521, 2053, 4, granules=True)["BLOCK_N"] == 4096  # 2052 > 2048
    assert "GRANULES" not in sm.plan(4096, 4096, 2)  # aligned widths keep their candidates
    for b in (2, 4):
        cands = sm.candidates(65521, 2053, b)
        assert cands[0] == sm.plan(65521, 2053, b) and len(cands) == 8
        assert sum(c["GRANULES"] for c in cands) == 5
    # 32768 columns: the rows kernel gets a second candidate, so that it is timed
    assert len(sm.candidates(4096, 32768, 4)) == 2
    assert len(sm.candidates(4096, 32768, 2)) == 4  # and two of the PAIRS form


@cpu_only
def test_race_runs_the_winner_and_reports_both(monkeypatch):
    from implementations.softmax import triton as sm

    ran: list[str] = []
    monkeypatch.setattr(sm._CHOSEN, "raced", {})
    monkeypatch.setattr(sm._CHOSEN, "seen", {})
    monkeypatch.setattr(sm, "_run_rows_tuned", lambda *a: ran.append("rows"))
    monkeypatch.setattr(sm, "_run_split_tuned", lambda *a: ran.append("split"))
    monkeypatch.setattr(sm, "_time_ms", lambda fn: {"rows": 0.174, "split": 0.142}[(fn(), ran[-1])[1]])
    sm._CHOSEN.seen[("split", 32768, 2, 4096)] = "kernel=split BLOCK=8192 (autotuned)"
    x = torch.zeros(4096, 32768, dtype=torch.bfloat16, device="meta")
    sm._rows_or_split(x, x, 4096, 32768, 4096)
    assert ran[:2] == ["rows", "split"]
    del ran[:]
    sm._rows_or_split(x, x, 4096, 32768, 4096)
    assert ran == ["split"]
    text = discover().get("softmax", "triton").config(Case.make("softmax", "bfloat16", M=4096, N=32768))
    assert text.startswith("kernel=split BLOCK=8192 (autotuned); head to head rows 174us, split 142us")
    assert "lost: kernel=rows" in text
    # another dtype at the same width has not been raced: its untuned plan
    assert discover().get("softmax", "triton").config(
        Case.make("softmax", "float32", M=4096, N=32768)).startswith("kernel=rows")


_COMPILE = r"""
import json, os, re, subprocess, sys, tempfile
sys.path.insert(0, sys.argv[1])
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import implementations.softmax.triton as S

ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
out = []
jobs = []
for ty, b in (("*bf16", 2), ("*fp32", 4)):
    for c in S.candidates(65521, 2053, b):
        if c["GRANULES"]:
            jobs.append((S._softmax_rows, {"x_ptr": ty, "y_ptr": ty, "M": "i32", "N": "i32", "M_BUCKET": "i32"}, c))
    for c in S.candidates(4096, 32768, b):
        if c.get("PAIRS"):
            jobs.append((S._softmax_rows, {"x_ptr": ty, "y_ptr": ty, "M": "i32", "N": "i32", "M_BUCKET": "i32"}, c))
    for c in S.candidates(4096, 131072, b):
        if c.get("PAIRS"):
            jobs.append((S._softmax_split, {"x_ptr": ty, "y_ptr": ty, "stats_ptr": "*fp32", "count_ptr": "*i32",
                                            "N": "i32", "M_BUCKET": "i32"}, dict(c, P_MAX=32, MODE=0)))
    for c in S.split_candidates(4096, 32768, b):
        jobs.append((S._softmax_split, {"x_ptr": ty, "y_ptr": ty, "stats_ptr": "*fp32", "count_ptr": "*i32",
                                        "N": "i32", "M_BUCKET": "i32"}, dict(c, P_MAX=8, MODE=0)))
    for c in S.split_candidates(1567, 19945, b) + S.candidates(191, 90533, b):
        if c.get("GRANULES"):
            jobs.append((S._softmax_split, {"x_ptr": ty, "y_ptr": ty, "stats_ptr": "*fp32", "count_ptr": "*i32",
                                            "N": "i32", "M_BUCKET": "i32"}, dict(c, P_MAX=32, MODE=0)))
for kern, sig, c in jobs:
    const = {k: v for k, v in c.items() if k not in ("kernel", "num_warps", "maxnreg")}
    sig = dict(sig, **{k: "constexpr" for k in const})
    attrs = {(i,): [["tt.divisibility", 16]] for i, k in enumerate(sig) if k.endswith("_ptr")}
    if (c["kernel"] == "split" and not c.get("GRANULES")) or c.get("PAIRS"):
        attrs[(list(sig).index("N"),)] = [["tt.divisibility", 16]]
    k = triton.compile(ASTSource(fn=kern, signature=sig, constexprs=const, attrs=attrs),
                       target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": c["num_warps"], **({"maxnreg": c["maxnreg"]} if "maxnreg" in c else {})})
    ptx = k.asm["ptx"]
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(ptx)
    log = subprocess.run([ptxas, "-arch=sm_90a", "-v", f.name, "-o", os.devnull],
                         capture_output=True, text=True, check=True).stderr
    os.unlink(f.name)
    out.append({"c": repr(c), "spill": int(re.search(r"(\d+) bytes spill stores", log).group(1)),
                "regs": int(re.search(r"Used (\d+) registers", log).group(1)),
                "ld_v4": len(re.findall(r"ld\.global[.\w:]*\.v4", ptx)),
                "ld_1": len(re.findall(r"ld\.global[.\w:]*\.b(?:16|32)\b", ptx)),
                "st_v4": len(re.findall(r"st\.global[.\w:]*\.v4", ptx))})
print(json.dumps(out))
"""


@cpu_only
def test_granule_and_mid_split_candidates_compile_for_sm90():
    """Granule candidates: 16-byte loads and stores (the body; the element-masked form
    has none at N=2053) and no spills; mid-width split candidates: no spills."""
    res = compile_for_sm90(_COMPILE)
    assert len(res) == 42 and not [r for r in res if r["spill"]], res
    # (rows: 5 a dtype; split at an unaligned N, whose rows start anywhere in a granule: 8 a dtype)
    gran = [r for r in res if "'GRANULES': True" in r["c"]]
    assert len(gran) == 26 and all(r["ld_v4"] and r["st_v4"] for r in gran), gran
    # PAIRS at bf16 32768: 16-byte words in and out; on 16 warps at most 64
    # registers, so that two programs fit an SM (the point of the form)
    # (split at bf16 131072: 16384 on 8 warps, 8192 on 4 and 32768 on 16, 32 words a thread, and 16384
    # on 16: at most 64 registers)
    pairs = {r["c"]: r for r in res if "PAIRS" in r["c"]}
    assert len(pairs) == 6 and all(r["ld_v4"] and r["st_v4"] for r in pairs.values()), pairs
    assert all(r["regs"] <= 64 for c, r in pairs.items() if "'num_warps': 32" not in c), pairs


# --------------------------------------------------------------------------- GPU

SEED = random.randrange(1 << 30)


def _gpu_check(m: int, n: int, dtype: str, **overrides) -> None:
    wl, case, inputs = _inputs(m, n, dtype, "cuda", SEED + m + n)
    impl = discover().get("softmax", "triton")
    ref = wl.reference(case, inputs)
    verify.poison_allocator("cuda", int(ref.numel()) * inputs["x"].element_size())
    y = impl.fn(**inputs, **overrides)
    torch.cuda.synchronize()
    _assert_ok(y, wl, case, inputs, f"{overrides} seed={SEED} config={impl.config(case)}")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ("float32", "bfloat16"))
@pytest.mark.parametrize("m,n", [(65521, 2053), (4096, 32768), (1000, 2053), (7, 4097), (3, 30001),
                                 (1, 1), (33, 16387)])
def test_gpu_autotuned(m, n, dtype):
    _gpu_check(m, n, dtype)
    _gpu_check(m, n, dtype)  # the second call runs what the first chose
    text = discover().get("softmax", "triton").config(Case.make("softmax", dtype, M=m, N=n))
    if n in (32768, 30001, 16387):
        assert text.startswith(("kernel=rows", "kernel=split")) and "head to head" in text, text
    torch.cuda.empty_cache()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ("float32", "bfloat16"))
def test_gpu_every_candidate(dtype):
    from implementations.softmax import triton as sm

    for (m, n), cands in (((1000, 2053), sm.candidates), ((4099, 319), sm.candidates), ((999, 232), sm.candidates),
                          ((97, 30001), sm.split_candidates),
                          ((31, 30001), sm.candidates), ((37, 16400), sm.candidates), ((300, 32768), sm.candidates)):
        wl, case, inputs = _inputs(m, n, dtype, "cuda", SEED + n)
        x = inputs["x"]
        for c in cands(m, n, x.element_size()):
            for mode in ((0, None) if c["kernel"] == "split" else (None,)):
                y = verify.poison_(torch.empty_like(x))
                _launch(sm, x, y, c, mode)
                torch.cuda.synchronize()
                _assert_ok(y, wl, case, inputs, f"{c} mode={mode} seed={SEED}")


def test_tuned_kernels_are_offered_their_candidates():
    """The split and pipe kernels' autotuners (row_tuning.tuned) offer exactly their
    candidates, register caps included, for the shape being launched."""
    from implementations.softmax import triton as sm
    from implementations.softmax._triton_plan import pipe_candidates, split_candidates

    for tuner, cands, n in ((sm._pipe_tuned, lambda m, n, b: pipe_candidates(n, b), 90533),
                            (sm._split_tuned, split_candidates, 19945), (sm._split_tuned, split_candidates, 131072)):
        for dtype in (torch.bfloat16, torch.float32):
            x = torch.empty(7, n, dtype=dtype)
            got = tuner.early_config_prune(tuner.configs, {"x_ptr": x, "N": n})
            want = cands(7, n, x.element_size())
            assert [(g.kwargs, g.num_warps, g.maxnreg) for g in got] == [
                ({k: v for k, v in w.items() if k not in ("kernel", "num_warps", "maxnreg")}, w["num_warps"],
                 w.get("maxnreg")) for w in want]
            assert tuner is not sm._pipe_tuned or all(g.maxnreg for g in got)  # its register caps reach Triton
