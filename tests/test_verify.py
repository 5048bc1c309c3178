import math

import pytest
import torch

from suite import verify
from suite.workload import Case, discover

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
REG = discover()


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def test_exact_match_passes_and_small_error_is_measured():
    ref = torch.randn(1000, dtype=torch.float64)
    assert verify.check(ref.float(), ref, 1e-6).correct
    noisy = ref * (1 + 1e-3)
    c = verify.check(noisy, ref, 1e-2)
    assert c.correct and math.isclose(c.rel_err, 1e-3, rel_tol=1e-6)
    assert not verify.check(noisy, ref, 1e-4).correct


def test_nan_never_passes_even_with_huge_tolerance():
    ref = torch.randn(100, dtype=torch.float64)
    out = ref.clone()
    out[7] = float("nan")
    c = verify.check(out, ref, 1e9)
    assert not c.correct and "NaN" in c.message and c.check == "finite"


def test_shape_mismatch_and_non_tensor_fail():
    ref = torch.randn(4, 5, dtype=torch.float64)
    assert verify.check(ref.reshape(5, 4), ref, 1.0).check == "shape"
    assert verify.check(None, ref, 1.0).check == "type"


def test_poisoned_output_that_is_never_written_fails():
    ref = torch.randn(64, dtype=torch.float64)
    out = verify.poison_(torch.empty(64))
    out[:32] = ref[:32].float()  # half written
    assert not verify.check(out, ref, 1e-3).correct


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_poison_is_nan_in_every_dtype(dtype):
    t = verify.poison_(torch.empty(1001, dtype=dtype))
    assert torch.isnan(t).all()
    real = torch.empty, torch.empty_like, torch.empty_strided
    with verify.poisoned_empty():
        for t in (torch.empty(33, dtype=dtype), torch.empty_like(torch.ones(7, 5, dtype=dtype)),
                  torch.empty_strided((4, 3), (1, 4), dtype=dtype)):
            assert t.dtype == dtype and torch.isnan(t).all()
    assert (torch.empty, torch.empty_like, torch.empty_strided) == real


def _skips_last(x: torch.Tensor) -> torch.Tensor:
    """A gelu kernel that never writes its last element."""
    out = torch.empty_like(x)
    out[:-1] = torch.nn.functional.gelu(x[:-1].float()).to(x.dtype)
    return out


def _gelu_rule(n: int, dtype: str):
    wl, case = REG.workloads["gelu"], Case.make("gelu", dtype, N=n)
    return wl, case


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_unwritten_last_element_fails_in_every_dtype_on_the_cpu(dtype):
    # an even length: a float32 NaN read as 16-bit is (0, NaN), and the last even
    # index would read as 0 under a poison of the wrong dtype
    wl, case = _gelu_rule(3002, _name(dtype))
    inputs = wl.make_inputs(case, "cpu", 3)
    ref = wl.reference(case, inputs)
    with verify.poisoned_empty():
        out = _skips_last(inputs["x"])
    c = verify.check_case(wl, case, out, ref)
    assert not c.correct and c.check == "finite", c
    honest = torch.nn.functional.gelu(inputs["x"].float()).to(dtype)
    assert verify.check_case(wl, case, honest, ref).correct


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_unwritten_last_element_fails_in_every_dtype_on_the_gpu(dtype):
    """The caching allocator poisoned in the output's dtype: 3,000,017 elements (an
    even last index), the gelu case a float32 poison let through in bfloat16."""
    wl, case = _gelu_rule(3_000_017, _name(dtype))
    inputs = wl.make_inputs(case, "cuda", 3)
    ref = wl.reference(case, inputs)
    verify.poison_allocator("cuda", ref.numel() * inputs["x"].element_size(), dtype)
    out = _skips_last(inputs["x"])  # no Python-level poisoning: the allocator's blocks only
    torch.cuda.synchronize()
    c = verify.check_case(wl, case, out, ref)
    assert not c.correct and c.check == "finite", c


def _softmax_rows(dtype, m=32768, n=64, seed=5):
    wl, case = REG.workloads["softmax"], Case.make("softmax", _name(dtype), M=m, N=n)
    inputs = wl.make_inputs(case, "cpu", seed)
    honest = torch.softmax(inputs["x"].float(), dim=-1).to(dtype)
    return wl, case, honest, wl.reference(case, inputs)


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_one_zeroed_or_uniform_row_of_32768_fails_in_every_dtype(dtype):
    wl, case, honest, ref = _softmax_rows(dtype)
    ok = verify.check_case(wl, case, honest, ref)
    assert ok.correct and ok.check is None and ok.elem_err < ok.elem_tol
    for row in (0, 17_000, 32_767):
        for wrong in (0.0, 1.0 / case["N"]):
            out = honest.clone()
            out[row] = wrong
            c = verify.check_case(wl, case, out, ref)
            assert not c.correct and c.check in ("normwise", "elementwise"), (row, wrong, c)
            assert f"row {row}," in c.message or c.check == "normwise"
    if dtype == torch.bfloat16:  # the normwise error alone lets this row through
        out = honest.clone()
        out[-1] = 0.0
        assert verify.relative_error(out, ref) < wl.tolerance(case)
        assert verify.check_case(wl, case, out, ref).check == "elementwise"


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_residual_layernorm_gelu_last_row_zeroed_fails(dtype):
    wl = REG.workloads["residual_layernorm_gelu"]
    case = Case.make("residual_layernorm_gelu", _name(dtype), M=8192, N=256)
    inputs = wl.make_inputs(case, "cpu", 11)
    ref = wl.reference(case, inputs)
    honest = ref.to(dtype)
    assert verify.check_case(wl, case, honest, ref).correct
    honest[-1] = 0
    c = verify.check_case(wl, case, honest, ref)
    assert not c.correct and c.check in ("normwise", "elementwise")
    if dtype == torch.bfloat16:
        assert c.check == "elementwise" and "row 8191," in c.message


def test_wrong_dtype_fails_even_with_right_values():
    wl, case = _gelu_rule(1000, "bfloat16")
    inputs = wl.make_inputs(case, "cpu", 1)
    ref = wl.reference(case, inputs)
    c = verify.check_case(wl, case, ref.float(), ref)
    assert not c.correct and c.check == "dtype" and "float32" in c.message


def test_the_bound_is_the_dtypes_rounding_and_the_reductions():
    rule = verify.Rule(tol=1.0, dtype="bfloat16", rounding=8, reduction=1)
    assert rule.unit == 2.0**-8
    assert rule.elem_tol == pytest.approx(8 * 2.0**-8 + 8 * 2.0**-24)
    long = verify.Rule(tol=1.0, dtype="float32", rounding=8, reduction=8192)
    assert long.elem_tol == pytest.approx(8 * 2.0**-24 + 8 * math.sqrt(8192) * 2.0**-24)
    # a coarser math mode sets the unit: tf32 keeps 11 bits of a float32
    assert verify.Rule(tol=1.0, dtype="float32", rounding=8, math="tf32").unit == 2.0**-11
    # every zeroed or uniform row fails only while the bound stays well below 1/2
    for wl in REG.workloads.values():
        for d in wl.dtypes:
            case = wl.cases("quick", [d])[-1]
            assert verify.rule_for(wl, case).elem_tol < 0.1, (wl.name, d)


def test_an_implementation_may_round_more_than_its_workload():
    wl = REG.workloads["attention"]
    case = Case.make("attention", "bfloat16", B=1, H=2, S=256, D=64, causal=1)
    eager = REG.get("attention", "eager")
    base, own = verify.rule_for(wl, case), verify.rule_for(wl, case, eager)
    assert (base.rounding, own.rounding) == (16.0, 32.0)
    assert own.elem_tol - base.elem_tol == pytest.approx(16 * 2.0**-8)
    for impl in REG.for_workload("attention"):  # torch.compile of eager: eager's
        want = 32.0 if impl.backend in ("eager", "compile") else 16.0
        assert verify.rule_for(wl, case, impl).rounding == want, impl.name
    # the looser bound still fails a wrong row of eager's own output
    inputs = wl.make_inputs(case, "cpu", 3)
    ref = wl.reference(case, inputs)
    out = eager.fn(**inputs)
    assert verify.check_case(wl, case, out, ref, impl=eager, inputs=inputs).correct
    out[0, 1, 200] = 0.0
    c = verify.check_case(wl, case, out, ref, impl=eager, inputs=inputs)
    assert not c.correct and c.check == "elementwise", c
    # and every implementation's bound, its own rounding included, stays below 1/4
    for impl in REG.impls.values():
        w = REG.workloads[impl.workload]
        for d in w.dtypes:
            assert verify.rule_for(w, w.cases("quick", [d])[-1], impl).elem_tol < 0.25, impl.name


def test_a_one_column_gemm_is_held_to_its_columns_scale():
    """With one column, a GEMM row is one element, and cancellation can bring it near
    zero: torch's own float32 matrix-vector product failed the row-RMS bound at 16 of 20
    seeds.  Its column's RMS is the scale; a wrong element or column still fails."""
    wl, torch_mm = REG.workloads["gemm"], REG.get("gemm", "torch")
    case = Case.make("gemm", "float32", M=256, N=1, K=512)
    assert verify.rule_for(wl, case).columns
    for seed in range(10):
        inputs = wl.make_inputs(case, "cpu", seed)
        ref, out = wl.reference(case, inputs), torch_mm.fn(**inputs)
        c = verify.check_case(wl, case, out, ref, impl=torch_mm, inputs=inputs)
        assert c.correct and c.elem_err < 0.5 * c.elem_tol, (seed, c)
    out[int(ref.abs().argmax())] *= 1 + 1e-4
    c = verify.check_case(wl, case, out, ref, impl=torch_mm, inputs=inputs)
    assert not c.correct and c.check == "elementwise" and "row or column RMS" in c.message
    square = Case.make("gemm", "bfloat16", M=64, N=96, K=80)
    inputs = wl.make_inputs(square, "cpu", 1)
    ref, out = wl.reference(square, inputs), torch_mm.fn(**inputs)
    assert verify.check_case(wl, square, out, ref, impl=torch_mm).correct
    out[:, 17] = 0
    assert not verify.check_case(wl, square, out, ref, impl=torch_mm).correct
    assert not verify.rule_for(REG.workloads["softmax"], Case.make("softmax", "float32", M=2, N=3)).columns


def test_one_element_beyond_the_rounding_fails_and_near_zero_has_a_floor():
    ref = torch.linspace(-3, 3, 1001, dtype=torch.float64)
    rule = verify.Rule(tol=1e-2, dtype="float32", rounding=8)
    out = ref.float()
    assert verify.check(out, ref, rule).correct
    out[500] += 1e-6  # ref[500] == 0: held to the floor, 8 u (~1e-6) times the RMS (1.7)
    assert verify.check(out, ref, rule).correct
    out[200] *= 1 + 1e-4  # one element off by 1e-4 relative (1700 units of 2^-24)
    c = verify.check(out, ref, rule)
    assert not c.correct and c.check == "elementwise" and "column 200" in c.message
    assert c.rel_err < 1e-2  # the normwise error passes


def test_subnormal_flushed_to_zero_passes():
    ref = torch.tensor([1.0, 1e-40, -1e-41], dtype=torch.float64)
    out = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float32)
    assert verify.check(out, ref, verify.Rule(tol=1e-6, dtype="float32", rounding=1)).correct


def test_the_check_does_not_touch_the_reference():
    ref = torch.randn(64, 33, dtype=torch.float64)
    keep = ref.clone()
    verify.check(ref.float(), ref, verify.Rule(tol=1e-3, dtype="float32", rounding=8))
    assert torch.equal(ref, keep)


def test_long_rows_are_checked_in_chunks(monkeypatch):
    monkeypatch.setattr(verify, "CHUNK", 64)
    ref = torch.randn(3, 1000, dtype=torch.float64)
    out = ref.float()
    rule = verify.Rule(tol=1e-5, dtype="float32", rounding=8)
    whole = verify.check(out, ref, rule)
    assert whole.correct
    out[2, 999] = 5.0
    c = verify.check(out, ref, rule)
    assert c.check == "normwise" or "(row 2, column 999)" in c.message
    vec = torch.randn(1000, dtype=torch.float64)
    bad = vec.float()
    bad[777] += 1.0
    c = verify.check(bad, vec, verify.Rule(tol=1.0, dtype="float32", rounding=8))
    assert c.check == "elementwise" and "column 777" in c.message


def _float32_layernorm_gelu(inputs):
    """A plain float32 two-pass residual + LayerNorm + GELU, as a kernel computes it."""
    h = inputs["x"] + inputs["r"]
    mean = h.mean(-1, keepdim=True)
    var = ((h - mean) ** 2).mean(-1, keepdim=True)
    ln = (h - mean) * torch.rsqrt(var + inputs["eps"]) * inputs["weight"] + inputs["bias"]
    return ln * 0.5 * (1 + torch.erf(ln / math.sqrt(2)))


def test_ill_conditioned_layernorm_rows_are_judged_by_their_condition():
    """Three-element rows: some have a spread far below their size, and centring them
    in float32 loses up to ~4 * kappa * u_acc. Without the rows' condition an honest
    kernel fails the elementwise test; with it the kernel passes and a wrong element
    of a well-conditioned row still fails."""
    wl = discover().workloads["residual_layernorm_gelu"]
    case = Case.make("residual_layernorm_gelu", "float32", M=83219, N=3)
    inputs = wl.make_inputs(case, "cpu", 11)
    ref = wl.reference(case, inputs)
    cond = wl.row_condition(case, inputs)
    assert cond.shape == (83219,) and float(cond.max()) > 50 and float(cond.median()) < 10
    honest = _float32_layernorm_gelu(inputs)
    rule = verify.rule_for(wl, case)
    plain = verify.check(honest, ref, rule)
    assert not plain.correct and plain.check == "elementwise"
    assert verify.check(honest, ref, rule, cond).correct
    assert verify.check_case(wl, case, honest, ref, inputs=inputs).correct
    calm = int(torch.argmin(cond))
    wrong = honest.clone()
    wrong[calm, 1] *= 1 + 1e-4
    bad = verify.check(wrong, ref, rule, cond)
    assert not bad.correct and bad.check == "elementwise" and f"row {calm}," in bad.message
    assert "condition" in bad.message
