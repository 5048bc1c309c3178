"""Triton gelu, softmax and residual_layernorm_gelu on the CPU (TRITON_INTERPRET=1).

Every `cpu` preset shape in every dtype against the float64 reference, plus
the long-row paths (online softmax, split layernorm) forced at small sizes by
lowering the on-chip row limit, so that the loops, the backwards re-read and
the ragged last chunk all run here.  Outputs come from a poisoned allocator:
an element a kernel never writes reads back as NaN and fails the check.

The interpreter does not enforce what the compiler does (constexpr globals,
layouts, register pressure), so one test also compiles each launch plan of
the quick and full presets for sm_90 with Triton's own ptxas, no GPU needed.
"""
from __future__ import annotations

import zlib
from types import SimpleNamespace

import pytest
import torch

from suite import verify
from suite.workload import Case, discover
from tests.helpers import check_softmax, compile_for_sm90

WORKLOADS = ("gelu", "softmax", "residual_layernorm_gelu")
DTYPES = ("float32", "float16", "bfloat16")

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="interpreter tests; the GPU has its own file")


def _registry():
    return discover()


@pytest.fixture
def poisoned(monkeypatch):
    """torch.empty_like hands out NaN-filled tensors while the kernel runs."""
    real = torch.empty_like

    def empty_like(t, *args, **kwargs):
        return verify.poison_(real(t, *args, **kwargs))

    monkeypatch.setattr(torch, "empty_like", empty_like)


def _check(wl_name: str, case: Case, seed: int, **overrides):
    reg = _registry()
    wl, impl = reg.workloads[wl_name], reg.get(wl_name, "triton")
    assert impl.check_available("cpu") is None
    inputs = wl.make_inputs(case, "cpu", seed)
    out = impl.fn(**inputs, **overrides)
    res = verify.check_case(wl, case, out, wl.reference(case, inputs), impl)
    assert res.correct, f"{case} {overrides}: {res.check}: {res.message}"


def _cpu_cases():
    reg = _registry()
    return [pytest.param(c, id=f"{c.workload}-{c.label}-{c.dtype}")
            for w in WORKLOADS for c in reg.workloads[w].cases("cpu", DTYPES)]


@pytest.mark.parametrize("case", _cpu_cases())
def test_cpu_preset(case, poisoned):
    _check(case.workload, case, seed=zlib.crc32(repr(case.key).encode()) % 10007)


# (M, N, block): one chunk shorter than the row, ragged tails of one element,
# a row shorter than one chunk, and many chunks.
LONG_ROWS = [(3, 1000, 64), (4, 17, 16), (2, 7, 8), (5, 4099, 1024), (2, 256, 32)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,block", LONG_ROWS)
@pytest.mark.parametrize("long_rows", ("online", "split2"))
def test_softmax_long_row_paths(m, n, block, dtype, long_rows, poisoned):
    _check("softmax", Case.make("softmax", dtype, M=m, N=n), seed=m * n + 7, max_fused=1, block=block,
           long_rows=long_rows)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,block,sub", [(3, 1000, 64, 16), (4, 17, 16, 8), (5, 4099, 1024, 256), (2, 256, 32, 8),
                                          (3, 1001, 512, 128), (1, 9, 16, 8)])
def test_softmax_split_reread(m, n, block, sub, dtype, poisoned):
    """The split kernel streaming its chunk SUB at a time and re-reading it for the output."""
    _check("softmax", Case.make("softmax", dtype, M=m, N=n), seed=m * n + 13, max_fused=1, block=block,
           long_rows="split2", sub=sub)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,block", [(5, 48, 32), (3, 64, 32), (7, 96, 64), (2, 16, 32), (1, 4112, 4096),
                                       (3, 61, 32), (4, 33, 32), (2, 7, 32), (3, 100, 64), (1, 4101, 4096)])
def test_softmax_pipe_path(m, n, block, dtype, poisoned):
    """The persistent pipe kernel under the interpreter, which runs its one
    program alone: rows of at most two chunks (ragged, and shorter than one),
    so that each wait is for chunks it has published itself; both of its
    branches run (the held chunk's row complete or not at the first look).
    Widths that are not multiples of 16 take the granule form: rows that
    start mid-granule, a last chunk past the body, rows with no whole granule."""
    _check("softmax", Case.make("softmax", dtype, M=m, N=n), seed=m * n + 17, max_fused=1, block=block,
           long_rows="pipe")


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_pipe_granules_at_aligned_widths(dtype, poisoned):
    """The granule form forced where rows are aligned (a body of the whole row, no head or tail)."""
    _check("softmax", Case.make("softmax", dtype, M=4, N=48), seed=5, max_fused=1, block=32, long_rows="pipe",
           granules=True)


def test_softmax_pipe_rows_of_minus_inf(poisoned):
    """A chunk of -inf gives zeros, not NaN, when the row has finite values elsewhere."""
    x = torch.full((3, 64), float("-inf"), dtype=torch.bfloat16)
    x[:, 40:] = torch.randn(3, 24).to(torch.bfloat16)
    y = _registry().get("softmax", "triton").fn(x, max_fused=1, block=32, long_rows="pipe")
    assert check_softmax(y, x).correct


def test_softmax_pipe_refusals():
    impl = _registry().get("softmax", "triton")
    with pytest.raises(ValueError, match="4 chunks a row need at least 2 programs at once, and 1 run"):
        impl.fn(torch.randn(3, 128, dtype=torch.bfloat16), max_fused=1, block=32, long_rows="pipe")


def test_softmax_pipe_refused_on_a_gpu_too_small(monkeypatch):
    """The tuned pipe path (a GPU, no forced chunk) checks pipe_fits before any launch."""
    from implementations.softmax import triton as sm

    monkeypatch.setattr(sm, "interpreting", lambda: False)
    monkeypatch.setattr(sm, "_sm_count", lambda index: 4)
    with pytest.raises(ValueError, match="need more programs at once than this GPU holds"):
        sm.softmax_triton(torch.randn(2, 1 << 20, dtype=torch.bfloat16), long_rows="pipe")


def test_softmax_pipe_fits():
    from implementations.softmax import triton as sm

    assert sm.pipe_fits(131072, 2, 132)
    assert sm.pipe_fits(131072, 4, 132)  # float32 too
    assert sm.pipe_fits(131072 + 8, 2, 132)  # and rows off 16-byte boundaries (the granule form)
    assert sm.pipe_fits(32769, 4, 132)
    assert not sm.pipe_fits(32768, 2, 132)  # a row fits one program
    assert sm.pipe_room(19945, 4, 132)  # but the pipe kernel runs there when asked for
    assert not sm.pipe_fits(1 << 20, 2, 4)  # 128 chunks a row, 12 to 24 programs at once on 4 SMs
    assert [c["PER_SM"] for c in sm.pipe_candidates(131072, 2)] == [6, 3, 5]
    assert [c["PER_SM"] for c in sm.pipe_candidates(131072, 4)] == [5, 4, 2]
    assert [(c["PAIRS"], c["GRANULES"], c["PER_SM"]) for c in sm.pipe_candidates(90533, 2)] == [(True, True, 5),
                                                                                                  (True, True, 10),
                                                                                                  (True, True, 2)]
    assert [(c["PAIRS"], c["GRANULES"]) for c in sm.pipe_candidates(65536, 4)] == [(False, False)] * 3


@pytest.mark.parametrize("sub", (None, 128))
def test_softmax_split_chunk_of_minus_inf(sub, poisoned):
    """A chunk (or, streamed, a group) holding only -inf gives zeros, not NaN, when the row has finite values."""
    x = torch.full((3, 5000), float("-inf"))
    x[:, 4990:] = torch.randn(3, 10)
    x[1, 2000:2003] = 1.0  # a finite group after -inf ones inside one chunk
    y = _registry().get("softmax", "triton").fn(x, max_fused=1, block=1024, long_rows="split2", sub=sub)
    assert check_softmax(y, x).correct


# numpy's warnings on values the kernels compute and then drop: the online kernel's -inf - -inf
# (selected away) and 2^(0 - m_row) on the masked-off lanes of its output walk (never stored)
@pytest.mark.filterwarnings("ignore:overflow encountered in exp2:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:invalid value encountered in subtract:RuntimeWarning")
@pytest.mark.parametrize("dtype", ("float32", "bfloat16"))
@pytest.mark.parametrize("long_rows,granules", (("online", False), ("split2", True), ("split2", False)))
def test_softmax_masked_rows_on_the_long_row_paths(long_rows, granules, dtype, poisoned):
    """Rows masked with -inf (a padded or causal tail: lanes that meet -inf chunk
    after chunk, chunks of nothing else), some of them far below 0 (row max
    under -88, where 2^-max overflows float32): zeros there, not NaN."""
    from implementations.softmax import triton as sm

    n = 1003  # odd: unaligned rows, for the granule form
    x = torch.randn(4, n).to(getattr(torch, dtype))
    x[0, 200:] = float("-inf")
    x[1] -= 100.0
    x[1, 130:900] = float("-inf")
    x[2, :600] = float("-inf")
    x[2] -= 120.0
    y = sm.softmax_triton(x, max_fused=1, block=128, long_rows=long_rows, granules=granules)
    res = check_softmax(y, x)
    assert res.correct, res.message


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_short_row_candidate(dtype, poisoned):
    """Each autotuning candidate of the rows kernels (packed rows, one row on 1 to 8 warps, no
    eviction hint, ALIGN, rlg's 16-byte GRANULES form of unaligned rows, one or two rows a
    warp in the LANES form), launched as the autotuner would, at irregular widths."""
    import triton

    from implementations.residual_layernorm_gelu import triton as rlg
    from implementations.softmax import triton as sm

    reg = _registry()
    # Under a few hundred rows the plans keep as few rows a program as they can, so these
    # M (none a multiple of the packed ROWS) draw the candidates of any M up to that
    # (and rows of at most 16 columns over enough rows that the narrow-block candidates of
    # tiny_rows appear: 1500 x 8, 1100 x 3)
    for m, n in ((13, 1000), (11, 1002), (5, 781), (9, 1024), (9, 2040), (1500, 8), (1100, 3), (3, 4721),
                 (3, 6656)):
        case = Case.make("residual_layernorm_gelu", dtype, M=m, N=n)
        wl = reg.workloads["residual_layernorm_gelu"]
        inputs = wl.make_inputs(case, "cpu", m + n)
        x = inputs["x"]
        for c in rlg.candidates(m, n, x.element_size()):
            y = torch.empty_like(x)
            rlg._rlg_rows[(triton.cdiv(m, c["ROWS"]),)](
                x, inputs["r"], inputs["weight"], inputs["bias"], y, m, n, float(inputs["eps"]),
                triton.next_power_of_2(m), ROWS=c["ROWS"], BLOCK_N=c["BLOCK_N"], EXACT=x.element_size() == 4,
                EVEN_N=n == c["BLOCK_N"], ALIGN=rlg.row_align(n, x.element_size()),
                WB_EARLY=c["WB_EARLY"], EVICT=c["EVICT"], GRANULES=c.get("GRANULES", False),
                LANES=c.get("LANES", 0), LIVE=rlg.live_cols(n, x.element_size()), num_warps=c["num_warps"],
                **({"maxnreg": c["maxnreg"]} if "maxnreg" in c else {}))
            res = verify.check_case(wl, case, y, wl.reference(case, inputs), inputs=inputs)
            assert res.correct, f"{case} {c}: {res.message}"
    for m, n in ((40, 128), (13, 100), (5, 3), (2100, 3), (1030, 7), (600, 16), (7, 319), (5, 232)):
        case = Case.make("softmax", dtype, M=m, N=n)
        wl = reg.workloads["softmax"]
        inputs = wl.make_inputs(case, "cpu", m + n)
        x = inputs["x"]
        for c in sm.candidates(m, n, x.element_size()):
            y = torch.empty_like(x)
            sm._softmax_rows[(triton.cdiv(m, c["ROWS"]),)](x, y, m, n, triton.next_power_of_2(m), ROWS=c["ROWS"],
                                                          BLOCK_N=c["BLOCK_N"], EVICT=c["EVICT"],
                                                          GRANULES=c.get("GRANULES", False),
                                                          LANES=c.get("LANES", 0), ALIGN=c.get("ALIGN", 1),
                                                          LIVE=sm.live_cols(n, x.element_size()),
                                                          num_warps=c["num_warps"])
            res = verify.check_case(wl, case, y, wl.reference(case, inputs), inputs=inputs)
            assert res.correct, f"{case} {c}: {res.message}"


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_wide_row_parts_candidate(dtype, poisoned):
    """Each candidate of the parts kernel (a whole row of 16385..32768 as halves or quarters; the
    L2 prefetch does nothing here), launched as the autotuner would, at even and ragged widths."""
    from implementations.residual_layernorm_gelu import triton as rlg

    wl = _registry().workloads["residual_layernorm_gelu"]
    for m, n in ((3, 32768), (2, 30002), (2, 16392)):
        case = Case.make("residual_layernorm_gelu", dtype, M=m, N=n)
        inputs = wl.make_inputs(case, "cpu", m + n)
        x = inputs["x"]
        ref = wl.reference(case, inputs)
        cands = rlg.parts_candidates(m, n, x.element_size())
        assert cands
        for c in cands:
            y = torch.empty_like(x)
            rlg._rlg_parts[(m,)](x, inputs["r"], inputs["weight"], inputs["bias"], y, m, n, float(inputs["eps"]),
                                 4, 132, PARTS=c["PARTS"], Q=c["Q"], EXACT=x.element_size() == 4,
                                 EVEN=c["EVEN"], ALIGN=rlg.row_align(n, x.element_size()), PF_AT=c["PF_AT"],
                                 PF_DIV=c["PF_DIV"], num_warps=c["num_warps"])
            res = verify.check_case(wl, case, y, ref, inputs=inputs)
            assert res.correct, f"{case} {c}: {res.message}"


def test_warp_rows_shapes():
    """One or two rows a warp, only where a row is wider than one pass of a warp's accesses
    and at most 1024 wide, at most 32 values a thread (64 for 16-bit rows on one or two warps)."""
    from implementations._shared.row_tuning import warp_rows
    from implementations.residual_layernorm_gelu import triton as rlg
    from implementations.softmax import triton as sm

    got = warp_rows(35712, 319, 2, 512)
    assert {(c["ROWS"], c["num_warps"]) for c in got} == {(4, 4), (8, 4), (8, 8), (16, 8), (2, 2), (4, 2), (2, 1)}
    assert {(c["LANES"], c["ALIGN"]) for c in got} == {(32, 1)}
    assert {c["LANES"] for c in warp_rows(16033, 232, 4, 256)} == {128}  # 16-byte accesses: 32 lanes x 4
    assert {(c["ROWS"], c["num_warps"]) for c in warp_rows(33104, 609, 4, 1024)} == {(4, 4), (8, 8), (2, 2)}
    assert warp_rows(3, 319, 2, 512) == [c for c in warp_rows(3, 319, 2, 512) if c["ROWS"] <= 4]
    assert not warp_rows(9999, 64, 2, 64) and not warp_rows(9999, 128, 4, 128)  # a warp pass holds the row
    assert not warp_rows(9999, 1500, 2, 2048)
    assert [c["WB_EARLY"] for c in warp_rows(9999, 609, 4, 1024, wb=True)] == [False] * 3
    # both kernels try them: rlg without ALIGN (its launcher passes it), softmax with it
    assert any(c.get("LANES") and "ALIGN" not in c for c in rlg.candidates(48768, 83, 2))
    assert any(c.get("LANES") == 32 and c["ALIGN"] == 1 for c in sm.candidates(35712, 319, 2))


def test_live_cols():
    """A row's width rounded up to a warp's pass of 16-byte accesses (512 bytes)."""
    from implementations._shared.row_tuning import live_cols

    assert [live_cols(n, 4) for n in (1, 128, 129, 609, 640, 5093)] == [128, 128, 256, 640, 640, 5120]
    assert [live_cols(n, 2) for n in (1, 72, 256, 257, 13437)] == [256, 256, 256, 512, 13568]


def test_row_align():
    from implementations.residual_layernorm_gelu.triton import row_align

    assert [row_align(n, 4) for n in (1000, 1002, 1001, 1024, 781)] == [4, 2, 1, 4, 1]
    assert [row_align(n, 2) for n in (1000, 1004, 1001, 4096, 8)] == [8, 4, 1, 8, 8]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,block", LONG_ROWS)
def test_layernorm_split_path(m, n, block, dtype, poisoned):
    case = Case.make("residual_layernorm_gelu", dtype, M=m, N=n)
    _check("residual_layernorm_gelu", case, seed=m * n + 11, max_fused=1, block=block)


# (M, N, block): whole 16-byte rows (N % 8 == 0), odd widths whose rows start anywhere in a
# granule, a row whose body leaves the last chunk empty (2049 / 1024), a short row of many
# chunks, and a width where the granules' body is a few elements shorter than the row
TEAM_ROWS = [(3, 5000, 1024), (4, 4999, 1024), (3, 2049, 1024), (5, 1030, 128), (2, 6007, 2048), (3, 8192, 2048)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,block", TEAM_ROWS)
def test_layernorm_team_path(m, n, block, dtype, poisoned):
    """The team kernel (chunks of a row on P programs, statistics combined across them), as
    its two-launch form: whole-vector and granule rows, against float64."""
    case = Case.make("residual_layernorm_gelu", dtype, M=m, N=n)
    _check("residual_layernorm_gelu", case, seed=m * n + 23, team=True, block=block)


# (M, N, part): odd widths whose rows start anywhere in a granule, split into 2..8 parts; a
# row whose body leaves its last part empty (2049 / 512 -> 5 parts, the body 2048 at most);
# whole 16-byte rows; one part (the forced path allows it)
FIT_ROWS = [(4, 4999, 1024), (3, 2049, 512), (2, 6007, 1024), (5, 1030, 256), (3, 4096, 512), (2, 1003, 1024),
            (9, 609, 128), (5, 384, 64)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,part", FIT_ROWS)
def test_layernorm_fit_path(m, n, part, dtype, poisoned):
    """The fitted kernel (a row held as parts of ``part`` columns, its body in 16-byte
    granules and its head and tail element by element), against float64."""
    case = Case.make("residual_layernorm_gelu", dtype, M=m, N=n)
    _check("residual_layernorm_gelu", case, seed=m * n + 29, fit=True, block=part)


def test_layernorm_fit_refuses_too_many_parts():
    reg = _registry()
    wl, impl = reg.workloads["residual_layernorm_gelu"], reg.get("residual_layernorm_gelu", "triton")
    inputs = wl.make_inputs(Case.make("residual_layernorm_gelu", "float32", M=2, N=2049), "cpu", 1)
    with pytest.raises(ValueError, match="9 parts of 256"):
        impl.fn(**inputs, fit=True, block=256)
    inputs = wl.make_inputs(Case.make("residual_layernorm_gelu", "float32", M=2, N=1024), "cpu", 1)
    with pytest.raises(ValueError, match="no fitted form for 1024 columns"):
        impl.fn(**inputs, fit=True)


def test_fit_candidates():
    """Rows that are not whole 16-byte vectors, only: of 2049..32768 columns, one-row
    candidates, 2..8 parts covering the row, each thread holding HELD columns; of
    64..2048 whose parts cover at least an eighth fewer lanes than the next power of two,
    2- and 8-row ones, a 16-byte vector a thread; none elsewhere.  The tightest cover
    first, at most MAX_CANDIDATES; evict_first on 16-bit x and r only."""
    import triton

    from implementations.residual_layernorm_gelu import _triton_fit as F

    for n, b in ((2048, 4), (2047, 2), (4096, 2), (5000, 4), (13920, 4), (32768, 2), (32769, 2), (40007, 4),
                 (1024, 2), (100, 4), (41, 4), (63, 2), (640, 4), (384, 2), (1200, 4), (880, 2)):
        assert not F.fit_candidates(64, n, b), (n, b)
    for n in list(range(64, 2048, 37)) + list(range(2049, 32768, 997)):
        for b in (2, 4):
            cands = F.fit_candidates(64, n, b)
            if n * b % 16 == 0 or n <= 2048 and not F.fit_tried(n, b):
                assert not cands, (n, b)
                continue
            capped = [c for c in cands if c.get("maxnreg")]
            assert capped == cands[len(cands) - len(capped):] and len(capped) <= F.MAX_CAPPED, (n, b)
            assert 1 <= len(cands) - len(capped) <= F.MAX_CANDIDATES, (n, b)
            covers = [c["PARTS"] * c["Q"] for c in cands if not c.get("maxnreg")]
            assert covers == sorted(covers) and covers[0] * 8 <= triton.next_power_of_2(n) * 7 or n > 2048, (n, b)
            for c in cands:
                assert 2 <= c["PARTS"] <= F.MAX_PARTS and c["PARTS"] == triton.cdiv(n, c["Q"]), (n, c)
                assert c["EVICT"] == ("" if b == 4 else "evict_first")
                if n > 2048 and c.get("maxnreg"):  # a form capped to two programs an SM
                    assert c["ROWS"] == 1 and c["maxnreg"] == F.two_an_sm(c["PARTS"] * c["Q"], c["num_warps"], b) > 0
                elif n > 2048:
                    assert c["ROWS"] == 1 and F.HELD[0] <= c["PARTS"] * c["Q"] // (32 * c["num_warps"]) <= F.HELD[1]
                else:
                    assert c["ROWS"] in F.SHORT_ROWS and c["PARTS"] * c["Q"] < triton.next_power_of_2(n), (n, c)
                    assert c["num_warps"] == min(16, max(1, c["ROWS"] * c["Q"] * b // 512)), (n, c)
    # 5093 float32: five parts of 1024 (0.6% idle), where one block a row takes 8192; 609: five of 128
    assert [(c["PARTS"], c["Q"]) for c in F.fit_candidates(1279, 5093, 4)][0] == (5, 1024)
    assert [(c["ROWS"], c["PARTS"], c["Q"]) for c in F.fit_candidates(33104, 609, 4)][:2] == [(2, 5, 128), (8, 5, 128)]
    # 19379 bf16: five parts of 4096 on 8 warps hold 80 columns a thread, one program an
    # SM uncapped; capped at 128 registers, two (float32 would spill there)
    assert [(c["PARTS"], c["Q"], c["num_warps"], c["maxnreg"]) for c in F.fit_candidates(656, 19379, 2)
            if c.get("maxnreg")] == [(5, 4096, 8, 128)]
    assert not [c for c in F.fit_candidates(656, 19379, 4) if c.get("maxnreg")]
    assert F.two_an_sm(2048, 16, 2) == 0  # 4 columns a thread: one program already holds few registers


def test_layernorm_team_statistics_of_offset_rows(poisoned):
    """Rows far from zero (mean 300, spread 1; bf16 inputs, so that x + r is exact in
    float32): the per-chunk mean and sum of squared deviations combine without the
    cancellation of a one-pass sum of squares (90000 + 1 - 90000 in float32)."""
    reg = _registry()
    wl, impl = reg.workloads["residual_layernorm_gelu"], reg.get("residual_layernorm_gelu", "triton")
    case = Case.make("residual_layernorm_gelu", "bfloat16", M=3, N=4999)
    inputs = wl.make_inputs(case, "cpu", 5)
    inputs["x"] = (inputs["x"].float() + 300.0).to(inputs["x"].dtype)
    out = impl.fn(**inputs, team=True, block=1024)
    res = verify.check_case(wl, case, out, wl.reference(case, inputs), impl)
    assert res.correct, res.message


def test_capped_rows_candidates():
    """The register-capped rows form: 16-bit rows of whole 16-byte vectors at 4097..16384 only,
    one row a program on bn / 1024 warps, w and b after the reductions, in both eviction hints."""
    from implementations.residual_layernorm_gelu import triton as rlg

    for n, b, warps in ((14464, 2, 16), (16384, 2, 16), (6656, 2, 8), (4104, 2, 8), (12288, 2, 16)):
        capped = [c for c in rlg.candidates(1685, n, b) if c.get("maxnreg")]
        assert len(capped) == 2 and {c["EVICT"] for c in capped} == {"", "evict_first"}, (n, capped)
        assert all(c["maxnreg"] == 64 and c["num_warps"] == warps and c["ROWS"] == 1 and not c["WB_EARLY"]
                   for c in capped), capped
    # float32 (spills under the cap), unaligned 16-bit rows (granule forms spill), other widths
    for n, b in ((14464, 4), (6656, 4), (19379, 2), (13437, 2), (4100, 2), (4096, 2), (32768, 2), (1024, 2)):
        assert not [c for c in rlg.candidates(1685, n, b) if c.get("maxnreg")], (n, b)


def test_team_candidates():
    """Chunks of 2048-8192 columns, at least two and at most TEAM_MAX_P a row; the granule
    form exactly where rows are not whole 16-byte vectors; none outside team_tried."""
    import triton

    from implementations.residual_layernorm_gelu import triton as rlg

    assert not rlg.team_candidates(100, 4096, 2) and not rlg.team_candidates(4, 70000, 4)
    for n in (4097, 6656, 13437, 14749, 19379, 32768, 50257, 65536):
        for b in (2, 4):
            cands = rlg.team_candidates(64, n, b)
            assert cands, (n, b)
            for c in cands:
                chunks = triton.cdiv(n, c["BLOCK"])
                assert 2 <= chunks <= rlg.TEAM_MAX_P and c["BLOCK"] >= rlg.TEAM_MIN_CHUNK, (n, c)
                assert c["GRANULES"] == (n * b % 16 != 0), (n, b, c)
                assert 8 <= c["BLOCK"] // (32 * c["num_warps"]) <= 16  # values a thread


def test_gelu_masked_and_unmasked_blocks(poisoned):
    for n, block in ((4097, 1024), (1024, 1024), (3, 1024)):
        _check("gelu", Case.make("gelu", "float32", N=n), seed=n, block=block)


@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
def test_gelu_exact_erf_on_16bit(dtype, poisoned):
    _check("gelu", Case.make("gelu", dtype, N=3001), seed=5, exact=True)


@pytest.mark.parametrize("max_fused", (1, 1 << 20))
def test_softmax_shift_invariance(max_fused):
    """Logits near 100 overflow exp in float32 unless the row max is taken out."""
    x = torch.randn(6, 3000) * 3 + 100
    y = _registry().get("softmax", "triton").fn(x, max_fused=max_fused, block=512)
    ref = torch.softmax(x.double(), -1)
    assert check_softmax(y, x).correct


def test_plans_pick_each_path():
    from implementations.residual_layernorm_gelu import triton as rlg
    from implementations.softmax import triton as sm

    assert sm.plan(2_097_152, 128, 2)["ROWS"] > 1  # short rows are packed
    assert sm.plan(32768, 4096, 4)["kernel"] == "rows"
    assert sm.plan(4096, 131072, 2, long_rows="split")["kernel"] == "split"
    assert sm.plan(4096, 131072, 2)["kernel"] == "split2"  # the interpreter cannot wait
    assert sm.plan(4096, 131072, 2, long_rows="pipe")["kernel"] == "pipe"
    assert sm.plan(4, 1 << 20, 4, long_rows="online")["kernel"] == "online"
    assert sm.plan(4, 1 << 20, 4)["kernel"] == "online"  # too many programs a row to split
    assert rlg.plan(65536, 1024, 2)["ROWS"] > 1
    assert rlg.plan(4096, 32768, 2)["kernel"] == "split"
    assert rlg.plan(1, 7, 4)["kernel"] == "rows"


def test_autotune_candidates():
    """The plan is always tried, lists stay short, every layout is legal."""
    from implementations._shared.row_tuning import WARP_DESIGNS
    from implementations.residual_layernorm_gelu import triton as rlg
    from implementations.softmax import triton as sm

    reg = _registry()
    for mod, wl in ((sm, "softmax"), (rlg, "residual_layernorm_gelu")):
        for case in reg.workloads[wl].cases("cpu") + reg.workloads[wl].cases("full"):
            for b in (2, 4):
                cands = mod.candidates(case["M"], case["N"], b)
                # rlg: up to 8 designs, the first four in both eviction hints; then the LANES form
                assert cands[0] == mod.plan(case["M"], case["N"], b)
                assert 1 <= len(cands) <= (12 if mod is rlg else 8) + len(WARP_DESIGNS)
                assert len({repr(c) for c in cands}) == len(cands)
                for c in cands:
                    assert c["kernel"] == cands[0]["kernel"] and 1 <= c["num_warps"] <= 32
                    for v in (c.get("ROWS", 1), c.get("BLOCK", 16), c["num_warps"]):
                        assert v & (v - 1) == 0  # powers of two, as tl.arange needs


def test_supports_and_config():
    reg = _registry()
    for w in WORKLOADS:
        impl, wl = reg.get(w, "triton"), reg.workloads[w]
        shape = wl.presets["cpu"][-1]
        assert "float64" in (impl.supports(Case.make(w, "float64", **shape)) or "")
        for case in wl.cases("full", DTYPES):
            assert impl.supports(case) is None
            assert impl.config(case)


# Run without TRITON_INTERPRET so that the kernels are real JITFunctions.
_COMPILE_SCRIPT = r"""
import json, os, re, subprocess, sys, tempfile
sys.path.insert(0, sys.argv[1])
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from suite.workload import Case, discover, itemsize
import implementations.gelu.triton as G
import implementations.softmax.triton as S
import implementations.residual_layernorm_gelu.triton as R

ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
reg = discover()
ptr = {"float32": "*fp32", "float16": "*fp16", "bfloat16": "*bf16"}
jobs = {}
for wl in ("gelu", "softmax", "residual_layernorm_gelu"):
    # the presets, plus rows no preset has: of at most 16 columns (tiny_rows) and long
    # unaligned ones (rlg's GRANULES form)
    # (softmax 16033 x 232: the one-warp rows form at 16-byte accesses, which no preset shape takes)
    extra = {"softmax": [Case.make(wl, "float32", M=3813928, N=3), Case.make(wl, "bfloat16", M=657893, N=5),
                         Case.make(wl, "float32", M=16033, N=232),
                         # long unaligned rows: the pipe kernel's granule form
                         Case.make(wl, "bfloat16", M=191, N=90533), Case.make(wl, "float32", M=367, N=82153)],
             "residual_layernorm_gelu": [Case.make(wl, "float32", M=33104, N=609),
                                         Case.make(wl, "bfloat16", M=2232008, N=8),
                                         # (wide 16-bit rows: the register-capped rows form)
                                         Case.make(wl, "bfloat16", M=1685, N=14464),
                                         Case.make(wl, "bfloat16", M=1949, N=6656),
                                         # (the team kernel's granule form and the fitted kernel
                                         # only: the rows and parts kernels at such widths are
                                         # element-wise and spill)
                                         Case.make(wl, "bfloat16", M=1075, N=14749),
                                         Case.make(wl, "float32", M=656, N=19379),
                                         # (the fitted kernel's forms capped to two programs an SM)
                                         Case.make(wl, "bfloat16", M=656, N=19379),
                                         Case.make(wl, "bfloat16", M=1597, N=13437),
                                         # (and the fitted kernel's: five parts of 1024 float32)
                                         Case.make(wl, "float32", M=1279, N=5093)]}.get(wl, [])
    team_only = {(1075, 14749), (656, 19379), (1279, 5093), (1597, 13437)}
    for case in reg.workloads[wl].cases("quick") + reg.workloads[wl].cases("full") + extra:
        if case.dtype == "float16":
            continue  # same code as bfloat16 but for the conversions
        p, b = ptr[case.dtype], itemsize(case.dtype)
        if wl == "gelu":
            blk, w = G.plan(case["N"], b)
            tried = G.candidates(b) if G.tuned_here(case["N"], b) else []
            for blk, w, ev in [(blk, w, "evict_first")] + tried:
                jobs[("gelu", p, blk, w, ev)] = (G._gelu_kernel,
                                                 {"x_ptr": p, "y_ptr": p, "n": "i32", "N_BUCKET": "i32"},
                                                 {"BLOCK": blk, "EXACT": b == 4, "EVICT": ev}, w)
            continue
        m, n = case["M"], case["N"]
        mod = S if wl == "softmax" else R
        # every autotuning candidate (the plan is the first of them)
        raced = (R.parts_candidates(m, n, b) + R.team_candidates(m, n, b) + R.fit_candidates(m, n, b)
                 if wl != "softmax" else [])
        if wl == "softmax" and S.pipe_fits(n, b, 132):  # raced against split on the H200
            raced = S.pipe_candidates(n, b)
        plans = mod.candidates(m, n, b) + raced
        if wl != "softmax" and (m, n) in team_only:
            plans = R.team_candidates(m, n, b) + R.fit_candidates(m, n, b)
        for plan in plans:
            ptrs = ["x_ptr", "y_ptr"] if wl == "softmax" else ["x_ptr", "r_ptr", "w_ptr", "b_ptr", "y_ptr"]
            sig = {k: p for k in ptrs}
            const = {k: v for k, v in plan.items() if k not in ("kernel", "num_warps", "maxnreg")}
            if wl != "softmax":
                const["EXACT"] = b == 4
            aligned = n % 16 == 0
            if wl != "softmax" and plan["kernel"] in ("rows", "parts"):
                if plan["kernel"] == "rows":
                    const["EVEN_N"] = n == plan["BLOCK_N"]
                const["ALIGN"] = R.row_align(n, b)
                aligned = aligned or const["ALIGN"] * b == 16  # N = 1000: 16-byte rows all the same
            if plan.get("GRANULES") and (wl != "softmax" or plan["kernel"] == "pipe"):
                aligned = True  # the body moves in 16-byte vectors whatever N is
            if plan["kernel"] == "fit":  # so does the fitted kernel's, where a thread holds 16 bytes of a part
                aligned = plan["ROWS"] * plan["Q"] // (32 * plan["num_warps"]) * b >= 16
            if plan.get("LANES") and wl == "softmax":
                aligned = aligned or plan["ALIGN"] * b == 16  # as rlg's ALIGN above
            if plan["kernel"] in ("split", "split2") and wl == "softmax":
                ptrs += ["stats_ptr", "count_ptr"]
                sig.update(stats_ptr="*fp32", count_ptr="*i32")
                const["P_MAX"] = triton.next_power_of_2(triton.cdiv(n, S.SPLIT_MIN_CHUNK))
                const["MODE"] = 0 if plan["kernel"] == "split" else 2
            if plan["kernel"] == "team":
                sig.update(stats_ptr="*fp32", count_ptr="*i32")
                const.update(P_MAX=triton.next_power_of_2(triton.cdiv(n, R.TEAM_MIN_CHUNK)), MODE=0,
                             ALIGN=R.row_align(n, b))
                aligned = aligned or const["ALIGN"] * b == 16
            if plan["kernel"] == "pipe":
                ptrs += ["stats_ptr", "count_ptr"]
                sig.update(stats_ptr="*fp32", count_ptr="*i32")
                smallest = min(c["BLOCK"] for c in S.pipe_candidates(n, b))
                const["P_MAX"] = triton.next_power_of_2(triton.cdiv(n, smallest))
            if plan["kernel"] == "rows":
                const["LIVE"] = R.live_cols(n, b)  # as both launchers pass it
            if plan["kernel"] in ("rows", "pipe", "parts", "fit"):
                sig.update(M="i32", N="i32")
            else:
                sig.update(N="i32")
            if wl != "softmax":
                sig["eps"] = "fp32"
            sig["M_BUCKET"] = "i32"
            if plan["kernel"] == "parts":
                sig["NUM_SMS"] = "i32"
            kern = {"rows": S._softmax_rows if wl == "softmax" else R._rlg_rows, "online": S._softmax_online,
                    "split": S._softmax_split if wl == "softmax" else R._rlg_split,
                    "split2": S._softmax_split, "pipe": S._softmax_pipe, "parts": R._rlg_parts,
                    "team": R._rlg_team, "fit": R._rlg_fit}[plan["kernel"]]
            sig = {name: sig[name] for name in kern.arg_names if name in sig}
            key = (wl, plan["kernel"], p, n % 16 == 0, tuple(sorted(const.items())), plan["num_warps"],
                   plan.get("maxnreg"))
            jobs[key] = (kern, sig, const, plan["num_warps"], n % 16 == 0, aligned, plan.get("maxnreg"))
# one rows config without LIVE beside the same with it: float32 640 on one warp (1024 lanes)
row_sig = {k: "*fp32" for k in ("x_ptr", "r_ptr", "w_ptr", "b_ptr", "y_ptr")}
row_sig.update(M="i32", N="i32", eps="fp32", M_BUCKET="i32")
for live in (0, R.live_cols(640, 4)):
    const = dict(ROWS=1, BLOCK_N=1024, EXACT=True, EVEN_N=False, ALIGN=4, WB_EARLY=True, EVICT="", LIVE=live)
    jobs[("live-pair", live)] = (R._rlg_rows, row_sig, const, 1, False, True, None)
print(len(jobs), file=sys.stderr)
out = []
for key, job in jobs.items():
    kern, sig, const, warps = job[:4]
    n16, aligned, maxnreg = job[4:7] if len(job) > 4 else (True, True, None)
    sig = dict(sig, **{k: "constexpr" for k in const})
    n_ptr = sum(1 for v in sig.values() if v.startswith("*"))
    # what the launcher specialises on: 16-byte aligned pointers, and N % 16 == 0 where so
    div = list(range(n_ptr)) + ([i for i, k in enumerate(sig) if k in ("n", "N")] if n16 else [])
    attrs = {(i,): [["tt.divisibility", 16]] for i in div}
    k = triton.compile(ASTSource(fn=kern, signature=sig, constexprs=const, attrs=attrs),
                       target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": warps, **({"maxnreg": maxnreg} if maxnreg else {})})
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(k.asm["ptx"])
    log = subprocess.run([ptxas, "-arch=sm_90a", "-v", f.name, "-o", os.devnull],
                         capture_output=True, text=True, check=True).stderr
    os.unlink(f.name)
    out.append({"key": repr(key), "regs": int(re.search(r"Used (\d+) registers", log).group(1)),
                "spill": int(re.search(r"(\d+) bytes spill stores", log).group(1)),
                "v4": bool(re.search(r"ld\.global[.\w:]*\.v4", k.asm["ptx"])), "aligned": aligned})
print(json.dumps(out))
"""


def test_launch_plans_compile_for_sm90_without_spills():
    results = compile_for_sm90(_COMPILE_SCRIPT, timeout=600)
    assert len(results) >= 40  # the plans and every autotuning candidate
    from implementations.residual_layernorm_gelu.triton import SPILL_OK

    def allowed(r) -> int:  # the spill bytes SPILL_OK allows this result
        for (b, parts, at, div), limit in SPILL_OK.items():
            dtype = "'*fp32'" if b == 4 else "'*bf16'"
            if all(f in r["key"] for f in ("'parts'", dtype, f"('PARTS', {parts})", f"('PF_AT', {at})",
                                           f"('PF_DIV', {div})")):
                return limit
        return 0

    assert not [r for r in results if r["spill"] > allowed(r)], "spills"
    # LIVE drops the registers of the passes past the row (640 of 1024 lanes: 5 of 8 a thread)
    pair = {r["key"]: r["regs"] for r in results if "live-pair" in r["key"]}
    assert pair["('live-pair', 640)"] < 0.8 * pair["('live-pair', 0)"], pair
    # the parts kernel's candidates, the L2 prefetch (cp.async.bulk.prefetch) among them, in both dtypes
    parts = [r for r in results if "'parts'" in r["key"]]
    assert len([r for r in parts if "('PF_DIV', 4)" in r["key"]]) >= 4 and len(parts) >= 12
    assert not [r for r in results if r["aligned"] and not r["v4"]], "loads not 16 bytes wide"
    # the team kernel's candidates, whole-vector and granule rows, in both dtypes
    team = [r for r in results if "'team'" in r["key"]]
    assert len([r for r in team if "('GRANULES', True)" in r["key"]]) >= 8 and len(team) >= 16
    # the fitted kernel's candidates, in both dtypes, each loading its body in 16-byte vectors
    fit = [r for r in results if "'fit'" in r["key"]]
    assert len([r for r in fit if "'*fp32'" in r["key"]]) >= 4 and len([r for r in fit if "'*bf16'" in r["key"]]) >= 2


def test_chosen_config_lists_every_candidate_timing():
    import triton

    from implementations._shared.row_tuning import Chosen

    chosen = Chosen(lambda m, n, b: dict(kernel="rows", ROWS=1, BLOCK_N=128, num_warps=1))
    a = triton.Config({"ROWS": 1, "BLOCK_N": 128}, num_warps=1)
    b = triton.Config({"ROWS": 2, "BLOCK_N": 128}, num_warps=2)
    tuner = SimpleNamespace(best_config=b, configs_timings={a: [0.020, 0.019, 0.021], b: [0.010, 0.009, 0.011]})
    assert chosen.config(500, 128, 4).startswith("kernel=rows ROWS=1")  # untuned: the plan
    chosen.record("rows", tuner, 128, 4, 512)
    tuner.configs_timings = {}  # a later key's tuning does not rewrite this one
    chosen.record("rows", tuner, 128, 4, 512)
    assert chosen.config(500, 128, 4) == ("kernel=rows ROWS=2 BLOCK_N=128 num_warps=2 (autotuned); "
                                         "tried 2,128,w2:10us, 1,128,w1:20us")


def test_chosen_config_names_the_register_cap():
    import triton

    from implementations._shared.row_tuning import Chosen

    chosen = Chosen(lambda m, n, b: dict(kernel="pipe", BLOCK=8192, PER_SM=6, num_warps=4, maxnreg=80))
    a = triton.Config({"BLOCK": 8192, "PER_SM": 6}, num_warps=4, maxnreg=80)
    b = triton.Config({"BLOCK": 16384, "PER_SM": 3}, num_warps=8, maxnreg=80)
    tuner = SimpleNamespace(best_config=a, configs_timings={a: [0.5], b: [0.6]})
    chosen.record("pipe", tuner, 131072, 2, 4096)
    assert chosen.config(4096, 131072, 2) == ("kernel=pipe BLOCK=8192 PER_SM=6 num_warps=4 maxnreg=80 (autotuned); "
                                             "tried 8192,6,w4,r80:500us, 16384,3,w8,r80:600us")


def test_forced_online_rows_get_online_candidates():
    """long_rows="online" at a width the split kernel would take: the online
    kernel is tuned over its own configs (a split config's SUB is no argument of it)."""
    from implementations.softmax import triton as sm

    params = set(sm._softmax_online.arg_names)
    for m, n in ((4096, 131072), (300, 262144), (7, 65537)):
        for b in (2, 4):
            cands = sm.candidates(m, n, b, long_rows="online")
            assert cands and all(c["kernel"] == "online" for c in cands)
            assert all(set(c) - {"kernel", "num_warps"} <= params for c in cands)


def test_rlg_races_whole_wide_rows_against_split():
    from implementations._shared.row_tuning import Raced
    from implementations.residual_layernorm_gelu import triton as rlg

    assert [rlg.parts_raced(n) for n in (16384, 16392, 30002, 32768, 32776)] == [False, True, True, True, False]
    assert rlg.plan(4096, 32768, 2)["kernel"] == "split"
    for b in (2, 4):
        cands = rlg.parts_candidates(4096, 32768, b)
        assert len(cands) <= 8 and {(c["PARTS"], c["Q"]) for c in cands} == {(4, 8192), (2, 16384)}
        assert all(c["EVEN"] and c["num_warps"] == 32 for c in cands)
        assert {c["PF_DIV"] for c in cands if c["PF_AT"]} >= {2, 4} and [c for c in cands if not c["PF_AT"]]
    ragged = rlg.parts_candidates(9, 30002, 2)
    assert {(c["Q"], c["EVEN"]) for c in ragged} == {(8192, False), (16384, False)}
    assert rlg.parts_candidates(4096, 4096, 2) == [] and rlg.parts_candidates(4096, 65536, 4) == []

    chosen = Raced(rlg.plan)
    chosen.seen[("split", 32768, 2, 4096)] = "kernel=split BLOCK=4096 (autotuned)"
    ran: list[str] = []
    runs = {"parts": lambda: ran.append("parts"), "split": lambda: ran.append("split")}
    timer = {"parts": 0.228, "split": 0.287}
    chosen.run_or_race(32768, "bfloat16", 2, 4096, runs, lambda fn: (fn(), timer[ran[-1]])[1])
    assert ran == ["parts", "split", "parts", "split"]  # each run (tuned), then each timed
    del ran[:]
    chosen.run_or_race(32768, "bfloat16", 2, 4096, runs, lambda fn: 1 / 0)  # raced: no timing
    assert ran == ["parts"]
    text = chosen.config_for(4096, 32768, "bfloat16", 2)
    assert text.startswith("kernel=parts; head to head parts 228us, split 287us; lost: kernel=split BLOCK=4096")
    assert chosen.config_for(4096, 32768, "float16", 2).startswith("kernel=split")  # not raced yet
    # the same key offered forms without the kept one (another residual dtype, fewer SMs): raced anew
    del ran[:]
    fewer = {"split": lambda: ran.append("split"), "team": lambda: ran.append("team")}
    chosen.run_or_race(32768, "bfloat16", 2, 4096, fewer, lambda fn: (fn(), {"split": 0.3, "team": 0.2}[ran[-1]])[1])
    assert ran == ["split", "team", "split", "team"]
    assert chosen.config_for(4096, 32768, "bfloat16", 2).startswith("kernel=team; head to head split 300us")


def test_tiny_rows_are_sized_by_their_real_bytes():
    """Rows of at most 16 columns: narrow blocks (BLOCK_N = next_pow2(N)) holding 4 to 32 KB of
    real row bytes a program, in both workloads' candidates; wider rows get none."""
    from implementations._shared.row_tuning import tiny_rows
    from implementations.residual_layernorm_gelu import triton as rlg
    from implementations.softmax import _triton_plan as sm

    for m, n, b in ((3813928, 3, 4), (657893, 5, 2), (2232008, 8, 2), (286973, 11, 4), (10 ** 6, 1, 2)):
        tiny = tiny_rows(m, n, b)
        assert tiny, (m, n, b)
        for c in tiny:
            assert c["BLOCK_N"] == max(2, 1 << (n - 1).bit_length())
            assert 4096 < c["ROWS"] * n * b <= 32768 and 1 <= c["num_warps"] <= 32
        narrow = [c for c in tiny if c["BLOCK_N"] < 16]
        for cands in (sm.candidates(m, n, b), rlg.candidates(m, n, b)):
            assert all(any(all(c[k] == t[k] for k in t) for c in cands) for t in narrow[:5])
    assert tiny_rows(10 ** 6, 17, 4) == [] and tiny_rows(10 ** 6, 100, 2) == []
