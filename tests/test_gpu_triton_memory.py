"""Triton gelu, softmax and residual_layernorm_gelu on the GPU, quick and full presets.

Fresh random inputs each run (the seed is printed on failure), the caching
allocator poisoned with NaN before each call so that an unwritten output
element fails, and the float64 reference of the workload.  The long-row
paths are also forced at mid sizes, where the compiled code (not the
interpreter) takes the loops and the ragged last chunk.
"""
from __future__ import annotations

import random

import pytest
import torch
import triton

from suite import verify
from suite.workload import Case, discover, itemsize

pytestmark = pytest.mark.gpu
WORKLOADS = ("gelu", "softmax", "residual_layernorm_gelu")
SEED = random.randrange(1 << 30)


def _run(wl_name: str, case: Case, **overrides) -> None:
    reg = discover()
    wl, impl = reg.workloads[wl_name], reg.get(wl_name, "triton")
    assert impl.check_available("cuda") is None
    assert impl.supports(case) is None
    inputs = wl.make_inputs(case, "cuda", SEED)
    ref = wl.reference(case, inputs)
    verify.poison_allocator("cuda", int(ref.numel()) * torch.empty((), dtype=inputs["x"].dtype).element_size())
    out = impl.fn(**inputs, **overrides)
    torch.cuda.synchronize()
    res = verify.check_case(wl, case, out, ref, impl, inputs)
    assert res.correct, f"{case} {overrides} seed={SEED} config={impl.config(case)}: {res.message}"


def _run_each_winner(chosen, case: Case, kernels: tuple[str, str]) -> None:
    """After a race: each kernel of ``kernels`` run as if it had won, into a poisoned output."""
    key = (case["N"], case.dtype, triton.next_power_of_2(case["M"]))
    winner, text = chosen.raced[key]
    try:
        for kernel in kernels:
            chosen.raced[key] = (kernel, text)
            _run(case.workload, case)
    finally:
        chosen.raced[key] = (winner, text)
    torch.cuda.empty_cache()


def _cases():
    reg = discover()
    seen, params = set(), []
    for w in WORKLOADS:
        for preset in ("quick", "full"):
            for c in reg.workloads[w].cases(preset):
                if c not in seen:
                    seen.add(c)
                    params.append(pytest.param(c, id=f"{w}-{c.label}-{c.dtype}"))
    return params


@pytest.mark.parametrize("case", _cases())
def test_preset(case):
    _run(case.workload, case)
    torch.cuda.empty_cache()


@pytest.mark.parametrize("dtype", ("float32", "bfloat16"))
@pytest.mark.parametrize("m,n,block", [(257, 3001, 1024), (64, 131072 + 5, 8192), (33, 40000, 4096),
                                       (17, 17, 16)])
def test_forced_long_row_paths(m, n, block, dtype):
    for long_rows in ("split", "split2", "online"):
        _run("softmax", Case.make("softmax", dtype, M=m, N=n), max_fused=1, block=block, long_rows=long_rows)
    for long_rows in ("split", "split2"):  # the chunk streamed and re-read, SUB at a time
        _run("softmax", Case.make("softmax", dtype, M=m, N=n), max_fused=1, block=block, long_rows=long_rows,
             sub=max(8, block // 4))
    _run("residual_layernorm_gelu", Case.make("residual_layernorm_gelu", dtype, M=m, N=n),
         max_fused=1, block=block)


@pytest.mark.parametrize("long_rows", ("split", "split2", "online"))
@pytest.mark.parametrize("m,n", [(4096, 131072), (300, 262144), (7, 65537)])
def test_softmax_long_row_kernels(m, n, long_rows):
    """Each long-row kernel, autotuned where it is, at the headline shape and ragged ones;
    split at 300 x 262144 puts 64 programs on each row, all waiting on each other."""
    _run("softmax", Case.make("softmax", "float32", M=m, N=n), long_rows=long_rows)
    torch.cuda.empty_cache()


@pytest.mark.parametrize("m,n", [(4096, 131072), (300, 262144 - 5)])
def test_softmax_split_bf16_autotuned(m, n):
    """bfloat16 split rows, autotuned over register-held and re-read chunks (4 to 64 programs a row)."""
    _run("softmax", Case.make("softmax", "bfloat16", M=m, N=n), long_rows="split")
    torch.cuda.empty_cache()


@pytest.mark.parametrize("dtype", ("float32", "bfloat16"))
@pytest.mark.parametrize("m,n", [(64, 32768), (9, 30002), (300, 16392)])
def test_rlg_wide_rows_race_split(m, n, dtype):
    """Rows of 16385..32768: the whole-row parts kernel raced against the split one, both checked."""
    from implementations.residual_layernorm_gelu import triton as rlg

    case = Case.make("residual_layernorm_gelu", dtype, M=m, N=n)
    _run("residual_layernorm_gelu", case)  # the race (its output: the last kernel timed)
    assert "head to head parts" in rlg._config(case)
    _run_each_winner(rlg._CHOSEN, case, ("parts", "split", "team"))


def _rlg_offset_inputs(m: int, n: int, offset: int, dtype: str):
    """(case, workload, inputs, float64 reference, x, r) of an rlg case, with x and r
    copied ``offset`` elements past a 16-byte boundary."""
    case = Case.make("residual_layernorm_gelu", dtype, M=m, N=n)
    wl = discover().workloads["residual_layernorm_gelu"]
    inputs = wl.make_inputs(case, "cuda", SEED)
    x, r = (torch.empty(m * n + offset, dtype=t.dtype, device="cuda")[offset:].view(m, n).copy_(t)
            for t in (inputs["x"], inputs["r"]))
    return case, wl, inputs, wl.reference(case, inputs), x, r


@pytest.mark.parametrize("dtype", ("float32", "bfloat16"))
@pytest.mark.parametrize("m,n", [(1075, 14749), (96, 6656), (33, 40007), (5, 4097)])
def test_rlg_team_races(m, n, dtype):
    """Rows of more than 4096 columns: the team kernel raced against the row's other kernel(s);
    every one of them checked as if it had won."""
    from implementations.residual_layernorm_gelu import triton as rlg

    case = Case.make("residual_layernorm_gelu", dtype, M=m, N=n)
    _run("residual_layernorm_gelu", case)
    text = rlg._config(case)
    assert "head to head" in text and "team" in text, text
    kernels = ("rows", "team") if rlg.plan(m, n, 4)["kernel"] == "rows" else (
        ("parts", "split", "team") if rlg.parts_raced(n) else ("split", "team"))
    if rlg.fit_tried(n, itemsize(dtype)):
        assert "fit" in text, text
        kernels += ("fit",)
    _run_each_winner(rlg._CHOSEN, case, kernels)


@pytest.mark.parametrize("dtype", ("float32", "bfloat16"))
@pytest.mark.parametrize("m,n", [(999, 609), (333, 1201), (4099, 385)])
def test_rlg_short_rows_race_fit(m, n, dtype):
    """Short unaligned rows that parts cover more tightly than a power of two: the rows kernel raced
    against the fitted one, both checked."""
    from implementations.residual_layernorm_gelu import triton as rlg

    case = Case.make("residual_layernorm_gelu", dtype, M=m, N=n)
    _run("residual_layernorm_gelu", case)
    text = rlg._config(case)
    assert "head to head" in text and "fit" in text, text
    _run_each_winner(rlg._CHOSEN, case, ("rows", "fit"))


@pytest.mark.parametrize("dtype", ("float32", "bfloat16", "float16"))
@pytest.mark.parametrize("m,n,offset", [(1279, 5093, 0), (133, 19379, 1), (70, 13437, 3), (9, 2049, 0),
                                        (41, 4101, 5), (300, 32767, 2), (999, 609, 0), (777, 641, 1),
                                        (501, 385, 3), (65, 1199, 0), (7, 881, 0)])
def test_rlg_fit_candidates(m, n, offset, dtype):
    """Every candidate of the fitted kernel, launched directly into a poisoned output; inputs
    also ``offset`` elements off a 16-byte boundary."""
    from implementations.residual_layernorm_gelu import triton as rlg

    case, wl, inputs, ref, x, r = _rlg_offset_inputs(m, n, offset, dtype)
    b = x.element_size()
    cands = rlg.fit_candidates(m, n, b)
    assert cands
    for c in cands:
        y = verify.poison_(torch.empty_like(x))
        rlg._rlg_fit[(triton.cdiv(m, c["ROWS"]),)](
            x, r, inputs["weight"], inputs["bias"], y, m, n, float(inputs["eps"]), triton.next_power_of_2(m),
            ROWS=c["ROWS"], PARTS=c["PARTS"], Q=c["Q"], EXACT=b == 4, EVICT=c["EVICT"], num_warps=c["num_warps"],
            maxnreg=c.get("maxnreg"))
        torch.cuda.synchronize()
        res = verify.check_case(wl, case, y, ref, inputs=inputs)
        assert res.correct, f"{case} offset {offset} {c} seed={SEED}: {res.message}"


@pytest.mark.parametrize("dtype", ("float32", "bfloat16", "float16"))
@pytest.mark.parametrize("m,n,offset", [(300, 14749, 0), (133, 19379, 1), (64, 8192, 0), (70, 13437, 3),
                                        (9, 6007, 0), (200, 65536, 0), (41, 4101, 5)])
def test_rlg_team_candidates(m, n, offset, dtype):
    """Every candidate of the team kernel (whole-vector rows, and the granule form of rows
    that start anywhere in a 16-byte granule), launched directly into a poisoned output with
    the counters zeroed as the autotuner does; inputs also ``offset`` elements off a 16-byte
    boundary; then a second launch on the same buffers (the counters zeroed again)."""
    from implementations.residual_layernorm_gelu import triton as rlg

    case, wl, inputs, ref, x, r = _rlg_offset_inputs(m, n, offset, dtype)
    b = x.element_size()
    cands = rlg.team_candidates(m, n, b)
    assert cands and all(c["GRANULES"] == (n * b % 16 != 0) for c in cands)
    p_max = triton.next_power_of_2(triton.cdiv(n, rlg.TEAM_MIN_CHUNK))
    for c in cands:
        for _ in range(2):
            stats, count = rlg._team_buffers(x, m, p_max)
            y = verify.poison_(torch.empty_like(x))
            rlg._rlg_team[(m * triton.cdiv(n, c["BLOCK"]),)](
                x, r, inputs["weight"], inputs["bias"], y, stats, count, n, float(inputs["eps"]),
                triton.next_power_of_2(m), BLOCK=c["BLOCK"], P_MAX=p_max, MODE=0, EXACT=b == 4,
                ALIGN=rlg.row_align(n, b), EVICT=c["EVICT"], GRANULES=c["GRANULES"], num_warps=c["num_warps"])
            torch.cuda.synchronize()
            res = verify.check_case(wl, case, y, ref, inputs=inputs)
            assert res.correct, f"{case} offset {offset} {c} seed={SEED}: {res.message}"


@pytest.mark.parametrize("dtype", ("float32", "bfloat16"))
@pytest.mark.parametrize("m,n,offset", [(300, 32768, 0), (200, 30002, 0), (133, 32760, 1), (5, 16392, 3)])
def test_rlg_parts_candidates(m, n, offset, dtype):
    """Every candidate of the parts kernel (halves or quarters, the L2 prefetch of a later program's x
    and r or not), launched directly into a poisoned output; inputs also ``offset`` elements off a
    16-byte boundary (the prefetch then covers only the whole 16-byte words inside each range), and
    programs whose prefetch target lies past the last row."""
    from implementations._shared.row_tuning import sm_count
    from implementations.residual_layernorm_gelu import triton as rlg

    case, wl, inputs, ref, x, r = _rlg_offset_inputs(m, n, offset, dtype)
    b = x.element_size()
    cands = rlg.parts_candidates(m, n, b)
    assert {c["PF_AT"] > 0 for c in cands} == {False, True}
    for c in cands:
        y = verify.poison_(torch.empty_like(x))
        rlg._rlg_parts[(m,)](x, r, inputs["weight"], inputs["bias"], y, m, n, float(inputs["eps"]),
                             triton.next_power_of_2(m), sm_count(0), PARTS=c["PARTS"], Q=c["Q"], EXACT=b == 4,
                             EVEN=c["EVEN"], ALIGN=rlg.row_align(n, b), PF_AT=c["PF_AT"], PF_DIV=c["PF_DIV"],
                             num_warps=c["num_warps"])
        torch.cuda.synchronize()
        res = verify.check_case(wl, case, y, ref, inputs=inputs)
        assert res.correct, f"{case} offset {offset} {c} seed={SEED}: {res.message}"


@pytest.mark.parametrize("dtype", ("float32", "bfloat16"))
@pytest.mark.parametrize("m,n", [(4099, 83), (999, 609), (777, 640), (5001, 41), (333, 1024), (37, 14464),
                                 (133, 6656)])
def test_rlg_rows_candidates(m, n, dtype):
    """Every candidate of the rows kernel at short rows (the LANES form among them: one or two rows
    a warp) and at wide ones (16-bit: the register-capped form), launched directly into a poisoned
    output."""
    from implementations.residual_layernorm_gelu import triton as rlg

    case, wl, inputs, ref, x, r = _rlg_offset_inputs(m, n, 0, dtype)
    b = x.element_size()
    cands = rlg.candidates(m, n, b)
    assert any(c.get("LANES") for c in cands) if n <= 1024 else any(c.get("maxnreg") for c in cands) == (b == 2)
    for c in cands:
        y = verify.poison_(torch.empty_like(x))
        rlg._rlg_rows[(triton.cdiv(m, c["ROWS"]),)](
            x, r, inputs["weight"], inputs["bias"], y, m, n, float(inputs["eps"]), triton.next_power_of_2(m),
            ROWS=c["ROWS"], BLOCK_N=c["BLOCK_N"], EXACT=b == 4, EVEN_N=n == c["BLOCK_N"], ALIGN=rlg.row_align(n, b),
            WB_EARLY=c["WB_EARLY"], EVICT=c["EVICT"], GRANULES=c.get("GRANULES", False), LANES=c.get("LANES", 0),
            num_warps=c["num_warps"], **({"maxnreg": c["maxnreg"]} if "maxnreg" in c else {}))
        torch.cuda.synchronize()
        res = verify.check_case(wl, case, y, ref, inputs=inputs)
        assert res.correct, f"{case} {c} seed={SEED}: {res.message}"


@pytest.mark.parametrize("m,n", [(1, 1), (1, 7), (3, 1), (1, 131072), (2, 65539)])
def test_degenerate_rows(m, n):
    for w in ("softmax", "residual_layernorm_gelu"):
        _run(w, Case.make(w, "bfloat16", M=m, N=n))


def test_gelu_huge_odd_size_exact_and_fast_erf():
    case = Case.make("gelu", "bfloat16", N=(1 << 27) + 3)
    _run("gelu", case, exact=True)
    _run("gelu", case, exact=False)


@pytest.mark.parametrize("dtype", ("float32", "float16", "bfloat16"))
@pytest.mark.parametrize("m,n,block", [(257, 3008, 1024), (64, 131072 + 16, 8192), (33, 40000, 4096),
                                       (17, 32, 16), (300, 262144, None), (4096, 131072, None),
                                       (257, 3001, 1024), (65, 131072 + 9, 8192), (191, 90533, None),
                                       (1567, 19945, None), (5, 9, 16)])
def test_softmax_pipe(m, n, block, dtype):
    """The persistent pipe kernel: forced to small chunks (many chunks a row,
    ragged last ones, more chunks than programs), and autotuned at the
    headline shape and wider rows (block None); widths off 16 take the
    granule form (rows starting mid-granule, rows with no whole granule)."""
    forced = {"max_fused": 1, "block": block} if block else {}
    _run("softmax", Case.make("softmax", dtype, M=m, N=n), long_rows="pipe", **forced)
    torch.cuda.empty_cache()


@pytest.mark.parametrize("dtype", ("float32", "bfloat16"))
@pytest.mark.parametrize("m,n", [(3, 90533), (5, 2053), (4, 131072)])
def test_softmax_input_off_16_bytes(m, n, dtype):
    """An input that is a view one element into a buffer (its data pointer off 16 bytes):
    the launcher's row offsets assume an aligned start, so it works on a copy."""
    impl = discover().get("softmax", "triton")
    buf = torch.randn(m * n + 1, dtype=getattr(torch, dtype), device="cuda") * 3
    x = buf[1:].view(m, n)
    assert x.data_ptr() % 16
    y = impl.fn(x)
    torch.cuda.synchronize()
    wl = discover().workloads["softmax"]
    res = verify.check_case(wl, Case.make("softmax", dtype, M=m, N=n), y, torch.softmax(x.double(), -1),
                            impl, {"x": x})
    assert res.correct, res.message


@pytest.mark.parametrize("dtype,m,n", [("float16", 1024, 131072), ("bfloat16", 1024, 131072),
                                       ("float32", 1024, 131072), ("bfloat16", 191, 90533),
                                       ("float32", 367, 82153)])
def test_softmax_split_races_pipe(dtype, m, n):
    """Long rows: the split kernel raced against the pipe one, then each as the winner."""
    from implementations.softmax import triton as sm

    case = Case.make("softmax", dtype, M=m, N=n)
    _run("softmax", case)  # the race (its output: the last kernel timed)
    assert "head to head split" in sm._config(case) and "pipe" in sm._config(case)
    _run_each_winner(sm._CHOSEN, case, ("split", "pipe"))


@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
def test_softmax_pairs_forced(dtype):
    """The PAIRS form compiled (rows, split chunks and pipe chunks), whose row max is
    taken on raw pairs (max.bf16x2 / max.f16x2): rows of -inf with one finite
    element in a low or a high half, a -inf inside a row, ragged chunks."""
    reg = discover()
    wl, impl = reg.workloads["softmax"], reg.get("softmax", "triton")
    for m, n, forced in ((3, 48, {}), (5, 160, {}), (7, 1040, {}), (9, 32768, {}),
                         (3, 4112, {"max_fused": 2048, "block": 1024}),
                         (2, 65552, {"max_fused": 2048, "block": 16384}),
                         (3, 4112, {"max_fused": 2048, "block": 1024, "long_rows": "pipe"}),
                         (2, 65552, {"max_fused": 2048, "block": 16384, "long_rows": "pipe"})):
        case = Case.make("softmax", dtype, M=m, N=n)
        inputs = wl.make_inputs(case, "cuda", SEED + n)
        x = inputs["x"]
        x[0] = float("-inf")
        x[0, n - 2] = 1.5  # the low half of the last word
        x[1, : n // 2] = float("-inf")
        x[1, 3] = 40.0  # the high half of a word, far above the rest of the row
        x[-1, 5] = float("-inf")
        ref = wl.reference(case, inputs)
        verify.poison_allocator("cuda", x.numel() * x.element_size())
        out = impl.fn(**inputs, pairs=True, **forced)
        torch.cuda.synchronize()
        res = verify.check_case(wl, case, out, ref, impl, inputs)
        assert res.correct, f"{case} pairs {forced} seed={SEED}: {res.message}"
