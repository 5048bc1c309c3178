"""Triton gemm and attention on the CPU (TRITON_INTERPRET=1).

Every `cpu` preset shape in every dtype the kernels claim, against the float64
reference; the persistent TMA gemm (GPU-only in the suite) is run here too,
directly, at ragged shapes that meet its 16-byte stride rule.  Outputs come
from a poisoned allocator: an element a kernel never writes reads back as NaN
and fails the check.  bfloat16 runs too: its tiles are upcast to float32 just
before tl.dot (the interpreter multiplies bfloat16 bit patterns as integers),
so loads, masks, the online softmax and the stores are all exercised; the real
bfloat16 tensor-core path is covered by tests/test_gpu_triton_compute.py.

The interpreter enforces none of the GPU's limits, so the last test compiles
every GPU autotune config for sm_90 (tests/sm90_compute_probe.py) and checks
shared memory, spills, and that wgmma and TMA are really used.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
import torch

from implementations.attention.head_dims import padded_head_dim
from suite import verify
from suite.workload import Case, discover

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="interpreter tests; the GPU has its own file")


@pytest.fixture
def poisoned(monkeypatch):
    """torch.empty / empty_like hand out NaN-filled tensors while the kernels run."""
    real_empty, real_like = torch.empty, torch.empty_like
    monkeypatch.setattr(torch, "empty", lambda *a, **k: verify.poison_(real_empty(*a, **k)))
    monkeypatch.setattr(torch, "empty_like", lambda *a, **k: verify.poison_(real_like(*a, **k)))


def _run(workload: str, impl_name: str, case: Case):
    reg = discover()
    wl, impl = reg.workloads[workload], reg.get(workload, impl_name)
    assert impl.supports(case) is None, impl.supports(case)
    inputs = wl.make_inputs(case, "cpu", seed=zlib.crc32(repr((impl_name, case.key)).encode()))
    out = impl.fn(**inputs)
    res = verify.check_case(wl, case, out, wl.reference(case, inputs), impl)
    assert res.correct, f"{impl_name} {case}: {res.check}: {res.message}"
    config = impl.config(case)
    assert config and "BLOCK_M=" in config, f"no config recorded for {case}: {config!r}"


def _cases(workload: str, dtypes):
    return [pytest.param(c, id=f"{c.label}-{c.dtype}") for c in discover().workloads[workload].cases("cpu", dtypes)]


@pytest.mark.parametrize("case", _cases("gemm", ("float32", "float16", "bfloat16")))
def test_gemm_cpu_preset(case, poisoned):
    _run("gemm", "triton", case)


@pytest.mark.parametrize("case", _cases("gemm", ("float32",)))
def test_gemm_tf32_cpu_preset(case, poisoned):
    _run("gemm", "triton:tf32", case)


@pytest.mark.parametrize("case", _cases("gemm", ("float32",)))
def test_gemm_tf32x3_cpu_preset(case, poisoned):
    _run("gemm", "triton:tf32x3", case)


def _persistent_configs():
    from implementations.gemm import _triton_persistent as P

    return P.LARGE + P.MID + P.SKINNY


# Multiples of 8 (TMA's 16-byte rows) but ragged against the 32-wide interpreter
# tiles, one row, and more tiles than programs so each program loops.
PERSISTENT_SHAPES = [dict(M=37, N=72, K=104), dict(M=1, N=64, K=40), dict(M=100, N=136, K=64),
                     # a ragged last wave over the 3 pretend SMs, K long enough to split it:
                     # 4 tiles (one split), 2 (fewer than the SMs), 5 with a ragged K and N
                     dict(M=33, N=64, K=1000), dict(M=5, N=40, K=800), dict(M=65, N=40, K=392)]


@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
@pytest.mark.parametrize("dims", PERSISTENT_SHAPES, ids=lambda d: "x".join(map(str, d.values())))
def test_gemm_persistent_in_interpreter(dims, dtype, poisoned):
    _run("gemm", "triton:persistent", Case.make("gemm", dtype, **dims))


@pytest.mark.parametrize("tile", sorted({tuple(c.kwargs[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"))
                                          for c in _persistent_configs()}), ids=lambda t: "x".join(map(str, t)))
def test_gemm_persistent_every_gpu_tile(tile, poisoned, monkeypatch):
    """Each GPU candidate's tile of the persistent TMA kernel, by the interpreter:
    ragged M, N and K (16-byte rows), several tiles a program, and one tile's K
    split over the pretend SMs."""
    from implementations.gemm import _triton_persistent as P

    bm, bn, bk, group = tile
    monkeypatch.setattr(P, "INTERPRETER_CONFIG", dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group))
    for split, dims in ((False, dict(M=2 * bm - 3, N=3 * bn + 8, K=8 * bk + 8)),
                        (True, dict(M=bm - 5, N=bn - 8, K=24 * bk + 40))):  # one tile, 3 SMs
        case = Case.make("gemm", "bfloat16", **dims)
        _run("gemm", "triton:persistent", case)
        assert ("split_k=" in discover().get("gemm", "triton:persistent").config(case)) == split


@pytest.mark.parametrize("dims", [dict(M=37, N=72, K=104), dict(M=65, N=200, K=64), dict(M=33, N=64, K=1000)],
                         ids=lambda d: "x".join(map(str, d.values())))
def test_gemm_persistent_on_lined_copies(dims, poisoned):
    """The persistent kernel on copies of A and B whose rows start on 128-byte
    lines (rows 64 bf16 elements apart or a multiple of that): the same product,
    the columns past K and N read as TMA's zeros, not as the copies' unwritten
    padding; operands already on lines are not copied."""
    from implementations.gemm import _triton_persistent as P

    case = Case.make("gemm", "bfloat16", **dims)
    wl = discover().workloads["gemm"]
    inputs = wl.make_inputs(case, "cpu", seed=dims["K"])
    c, text = P.matmul(inputs["a"], inputs["b"], lined=True)
    res = verify.check_case(wl, case, c, wl.reference(case, inputs), inputs=inputs)
    assert res.correct, f"{case} on lines: {res.message}"
    off = [n for n, d in zip("AB", (dims["K"], dims["N"])) if d % 64]
    assert text.endswith("; rows copied onto 128-byte lines: " + " and ".join(off)) if off else "lines" not in text


def test_gemm_persistent_races_lined_copies_once_a_key(monkeypatch):
    """Where a row is off lines and the copies pay, the first call of a key
    times both forms (copies included) and keeps the faster; later calls of
    the key run the winner without a race.  Rows on lines, or a GEMM too small
    for the copies to pay, never race."""
    from implementations.gemm import _triton_persistent as P

    launched, raced = [], []

    def launch(a, b, lined_key):
        launched.append((lined_key, a.stride(0), b.stride(0)))
        return torch.zeros(a.shape[0], b.shape[1]), f"cfg{lined_key}"

    def race(runs):
        raced.append(sorted(runs))
        for run in runs.values():
            run()
        return {False: 0.064, True: 0.058}  # ms

    monkeypatch.setattr(P, "_launch", launch)
    monkeypatch.setattr(P, "interpreting", lambda: False)
    monkeypatch.setattr(P._autotune, "race", race)
    monkeypatch.setattr(P, "_LINED", {})
    a, b = torch.ones(1792, 2376, dtype=torch.bfloat16), torch.ones(2376, 5304, dtype=torch.bfloat16)
    c, text = P.matmul(a, b)
    assert raced == [[False, True]] and c.shape == (1792, 5304)
    assert text == "cfg1; rows copied onto 128-byte lines: A and B; raced on lines:58us, as is:64us"
    assert launched[-1] == (1, 2432, 5312)  # K and N rounded up to 64 elements
    launched.clear()
    P.matmul(a[:1700], b)  # the same key: the winner, no race
    assert len(raced) == 1 and launched == [(1, 2432, 5312)]
    for a2, b2 in ((torch.ones(1024, 1024, dtype=torch.bfloat16), torch.ones(1024, 1024, dtype=torch.bfloat16)),
                   (torch.ones(64, 72, dtype=torch.bfloat16), torch.ones(72, 200, dtype=torch.bfloat16))):
        launched.clear()
        assert P.matmul(a2, b2)[1] == "cfg0" and launched == [(0, a2.shape[1], b2.shape[1])]
    assert len(raced) == 1


# Fewer tiles than the interpreter's pretend SMs and a long K: split K.  Odd K
# (A's rows unaligned, B's not), one row, a ragged tile edge, several slices.
SPLIT_SHAPES = [dict(M=3, N=40, K=333), dict(M=1, N=64, K=1001), dict(M=17, N=24, K=512)]


@pytest.mark.parametrize("dtype", ("float32", "bfloat16"))
@pytest.mark.parametrize("dims", SPLIT_SHAPES, ids=lambda d: "x".join(map(str, d.values())))
def test_gemm_split_k_in_interpreter(dims, dtype, poisoned):
    from implementations.gemm import _triton_tiled as T, padding

    cfg = T.INTERPRETER_CONFIG
    _, split = T.split_plan(dims["M"], dims["N"], dims["K"], cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"],
                            T.INTERPRETER_SMS)
    assert split > 1, dims
    for _ in range(2):  # the second call finds the per-tile counters reset by the first
        _run("gemm", "triton", Case.make("gemm", dtype, **dims))
    assert not T._locks[torch.device("cpu")].any()
    assert f"split_k={split}" in discover().get("gemm", "triton").config(Case.make("gemm", dtype, **dims))


def test_gemm_strided_views_past_32_bit_offsets(monkeypatch):
    """The kernel's offsets are 32-bit: a view whose furthest element lies 2^31
    or more past its first (fewer elements in it) is copied first."""
    from implementations.gemm import _triton_tiled as T

    x = torch.randn(40, 65)
    assert T._span(x[:, :10]) == 39 * 65 + 10
    assert T._span(x.t()) == x.numel() and T._span(x[:0]) == 0
    seen = []
    monkeypatch.setattr(T, "_padded", lambda a, b, *rest: (seen.append((a, b)), (None, ""))[1])
    monkeypatch.setattr(T, "_span", lambda t: 2**31 if t.shape == (40, 10) else 1)
    T.matmul(x[:, :10], torch.randn(10, 3), "ieee", sms=4)
    (a, b), = seen
    assert a.is_contiguous() and torch.equal(a, x[:, :10]) and b.shape == (10, 3)


def _gemm_tiles():
    from implementations.gemm import _triton_tiled as T

    tiles = {tuple(c.kwargs[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")) for c in T._ALL}
    return [pytest.param(t, id="x".join(map(str, t))) for t in sorted(tiles)]


@pytest.mark.parametrize("tile", _gemm_tiles())
def test_gemm_every_gpu_tile(tile, poisoned, monkeypatch):
    """Each GPU candidate's BLOCK_M x BLOCK_N x BLOCK_K (and GROUP_M), run by the
    interpreter (which ignores warps and stages) in float32 and bfloat16, with K
    whole and with the last wave's K split over the pretend SMs: ragged M, N and
    K, a K of several steps, and unaligned rows (K odd)."""
    from implementations.gemm import _triton_tiled as T

    bm, bn, bk, group = tile
    for whole_k in (1, 0):
        monkeypatch.setattr(T, "INTERPRETER_CONFIG", dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group,
                                                          WHOLE_K=whole_k))
        # 2 and 6 tiles over 4 pretend SMs: all tail, and a ragged last wave
        for dtype, dims in (("float32", dict(M=bm + 3, N=bn - 5, K=16 * bk + 7)),
                            ("bfloat16", dict(M=2 * bm - 1, N=2 * bn + 8, K=16 * bk + 5))):
            case = Case.make("gemm", dtype, **dims)
            _run("gemm", "triton", case)
            assert ("split_k=" in discover().get("gemm", "triton").config(case)) == (not whole_k)


def test_split_plans():
    from implementations.gemm._triton_tiled import launched, split_plan

    assert split_plan(4096, 4096, 4096, 128, 256, 64, 132) == (512, 1)  # a last wave of 116: no gain in a split
    assert split_plan(4096, 4096, 4096, 128, 256, 64, 128) == (512, 1)  # 4 whole waves: nothing to split
    assert split_plan(8, 8192, 8192, 16, 64, 256, 128) == (128, 1)  # one whole wave
    dp, s = split_plan(3, 1288, 3449, 16, 64, 256, 132)  # 21 tiles, 14 steps of K: all tail
    assert dp == 0 and s > 1
    dp, s = split_plan(403, 256, 5768, 64, 128, 64, 132)  # 14 tiles, 91 steps of K
    assert dp == 0 and 14 * s <= 132 and s >= 8
    assert split_plan(3, 1288, 200, 16, 64, 256, 132)[1] == 1  # one step of K: nothing to split
    dp, s = split_plan(1699, 2328, 1152, 128, 128, 64, 132)  # 266 tiles: two waves and 2 more
    assert dp == 264 and s > 1
    assert launched(1699, 2328, (dp, s), 128, 128) == 264 + 2 * s


def test_split_races_its_whole_k_twin():
    """Each candidate whose plan splits this shape is timed beside the same
    config with K whole, and only those; the twin's plan runs every tile whole."""
    from implementations.gemm._triton_tiled import _plan_of, bucket, candidates, prune, split_plan

    for m, n, k in ((512, 512, 512), (4096, 4096, 4096), (3, 1288, 3449), (1699, 2328, 1152)):
        a = torch.empty(1, dtype=torch.bfloat16)
        named = dict(a_ptr=a, M=m, N=n, K=k, SMS=132, M_KEY=bucket(m), N_KEY=bucket(n))
        base = candidates(bucket(m), bucket(n), 2, "tf32")
        raced = prune(None, named, PRECISION="tf32")
        splits = [c for c in base if split_plan(m, n, k, c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"],
                                                  c.kwargs["BLOCK_K"], 132)[1] > 1]
        assert len(raced) == len(base) + len(splits), (m, n, k)
        twins = [c for c in raced if c.kwargs["WHOLE_K"]]
        assert [(t.kwargs["BLOCK_M"], t.kwargs["BLOCK_N"], t.num_stages, t.num_warps) for t in twins] == \
            [(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_stages, c.num_warps) for c in splits]
        for t in twins:
            tiles = -(-m // t.kwargs["BLOCK_M"]) * -(-n // t.kwargs["BLOCK_N"])
            assert _plan_of(dict(t.kwargs, M=m, N=n, K=k, SMS=132)) == (tiles, 1)
    assert splits  # the last shape (266 tiles of 128 x 128) splits under some candidate


def test_gemm_tail_split_and_padding_in_interpreter(poisoned, monkeypatch):
    """Whole tiles beside split ones in one launch (6 tiles on 4 pretend SMs), then
    the padded path (odd K and N) with the size rule lifted."""
    from implementations.gemm import _triton_tiled as T, padding

    dims = dict(M=64, N=96, K=480)
    assert T.split_plan(64, 96, 480, 32, 32, 32, T.INTERPRETER_SMS)[0] == 4
    for dtype in ("float32", "bfloat16"):
        _run("gemm", "triton", Case.make("gemm", dtype, **dims))
        assert "(2 of 6 tiles)" in discover().get("gemm", "triton").config(Case.make("gemm", dtype, **dims))
    monkeypatch.setattr(padding, "PAD_BELOW", 1.0)
    for dtype in ("float32", "bfloat16"):
        case = Case.make("gemm", dtype, M=37, N=45, K=51)
        _run("gemm", "triton", case)
        assert "padded" in discover().get("gemm", "triton").config(case)


def test_gemm_supports():
    reg = discover()
    tiled, tf32, tf32x3, pers = (reg.get("gemm", n) for n in ("triton", "triton:tf32", "triton:tf32x3",
                                                             "triton:persistent"))
    wl = reg.workloads["gemm"]
    for case in wl.cases("full") + wl.cases("quick") + wl.cases("cpu"):
        assert tiled.supports(case) is None
        assert (tf32.supports(case) is None) == (case.dtype == "float32")
        assert (tf32x3.supports(case) is None) == (case.dtype == "float32")
    assert "float32" in pers.supports(Case.make("gemm", "float32", M=64, N=64, K=64))
    assert "16-byte" in pers.supports(Case.make("gemm", "bfloat16", M=3001, N=2047, K=1531))
    assert "16-byte" in pers.supports(Case.make("gemm", "float16", M=64, N=100, K=64))
    assert pers.supports(Case.make("gemm", "bfloat16", M=1, N=8192, K=8192)) is None
    assert pers.check_available("cpu")  # says why: it needs a Hopper GPU
    assert tf32.math == "tf32" and tf32.tolerance == {"float32": 2e-3}
    assert tf32x3.math == "tf32x3" and tf32x3.tolerance is None


@pytest.mark.parametrize("case", _cases("attention", ("float16", "bfloat16")))
def test_attention_cpu_preset(case, poisoned):
    _run("attention", "triton", case)


@pytest.mark.parametrize("case", _cases("attention", ("float32",)))
def test_attention_tf32x3_cpu_preset(case, poisoned):
    _run("attention", "triton:tf32x3", case)


@pytest.mark.parametrize("d", (8, 40, 96))
@pytest.mark.parametrize("impl_name,dtype", (("triton", "bfloat16"), ("triton:tf32x3", "float32")))
def test_attention_head_dims_off_the_tiles(d, impl_name, dtype, poisoned):
    """Head dims below or between the tiles' 64 and 128 (Phi-3's 96): the columns
    past D load as zeros (by mask, or TMA's fill) and are not stored."""
    for causal in (0, 1):
        _run("attention", impl_name, Case.make("attention", dtype, B=2, H=3, S=45, D=d, causal=causal))


@pytest.mark.parametrize("impl_name,dtype", (("triton", "float16"), ("triton:tf32x3", "float32")))
def test_attention_long_ragged_causal(impl_name, dtype, poisoned):
    """Several off-diagonal blocks, two diagonal sub-blocks and a ragged tail in one row of programs."""
    _run("attention", impl_name, Case.make("attention", dtype, B=1, H=1, S=203, D=64, causal=1))


def _every_tile(d: int, dtype: str, impl_name: str, configs, launch) -> None:
    """Each GPU config's BLOCK_M x BLOCK_N, run by the interpreter (which ignores
    warps and stages) at a ragged S, causal and not: the diagonal blocks and the
    masked last block of every tile.  ``launch(inputs, o, causal, bm, bn)``."""
    reg = discover()
    wl = reg.workloads["attention"]
    for causal in (0, 1):
        case = Case.make("attention", dtype, B=1, H=2, S=150, D=d, causal=causal)
        inputs = wl.make_inputs(case, "cpu", seed=d + causal)
        ref = wl.reference(case, inputs)
        for bm, bn in {(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]) for c in configs}:
            o = torch.empty_like(inputs["q"])
            launch(inputs, o, bool(causal), bm, bn)
            res = verify.check_case(wl, case, o, ref, reg.get("attention", impl_name))
            assert res.correct, f"{case} {bm}x{bn}: {res.message}"


@pytest.mark.parametrize("d", (64, 96, 128))
def test_attention_every_gpu_tile(d, poisoned):
    """The bfloat16 kernel's tiles (upcast before tl.dot, as the interpreter needs)."""
    import triton

    from implementations.attention import _triton_flash as A

    def launch(inputs, o, causal, bm, bn):
        A._attn_fwd[(triton.cdiv(150, bm), 2)](inputs["q"], inputs["k"], inputs["v"], o, 150,
                                               1.4426950408889634 / d ** 0.5, A.bucket(150),
                                               HEAD_DIM=padded_head_dim(d), DIM=d, CAUSAL=causal, UPCAST=True,
                                               BLOCK_M=bm, BLOCK_N=bn)

    _every_tile(d, "bfloat16", "triton", A.CONFIGS[padded_head_dim(d)], launch)


@pytest.mark.parametrize("d", (64, 96, 128))
def test_attention_tf32x3_every_gpu_tile(d, poisoned):
    """The float32 kernel's tiles, with TMA boxes of each tile's size."""
    import triton
    from triton.tools.tensor_descriptor import TensorDescriptor

    from implementations.attention import _triton_tf32x3 as F

    def launch(inputs, o, causal, bm, bn):
        qs, ks, vs = F.split(inputs["q"]), F.split(inputs["k"]), F.split_transposed(inputs["v"])
        dp = padded_head_dim(d)
        descs = (TensorDescriptor.from_tensor(qs, [bm, dp]), TensorDescriptor.from_tensor(ks, [bn, dp]),
                 TensorDescriptor.from_tensor(vs, [dp, bn]))
        F._attn_fwd[(triton.cdiv(150, bm), 2)](*descs, o, 150, 2, 1.4426950408889634 / d ** 0.5, F.bucket(150),
                                               HEAD_DIM=dp, DIM=d, CAUSAL=causal, BLOCK_M=bm, BLOCK_N=bn)

    _every_tile(d, "float32", "triton:tf32x3", F.CONFIGS[padded_head_dim(d)], launch)


@pytest.mark.parametrize("d", (64, 96, 128))
def test_attention_tf32x3_split_in_kernel_every_gpu_tile(d, poisoned):
    """The float32 kernel splitting K and V (and, where D <= 64, Q) as it loads
    them, each of its configs' tiles: V's boxes of keys by head dim, the rows past
    S the next head's (met by P's zeros), Q from its split pass at D > 64."""
    import triton
    from triton.tools.tensor_descriptor import TensorDescriptor

    from implementations.attention import _triton_tf32x3 as F

    def launch(inputs, o, causal, bm, bn):
        dp = padded_head_dim(d)
        raw_q = dp == 64
        q, k, v = (inputs[n].reshape(-1, d) for n in "qkv")
        descs = (TensorDescriptor.from_tensor(q if raw_q else F.split(inputs["q"]), [bm, dp]),
                 TensorDescriptor.from_tensor(k, [bn, dp]), TensorDescriptor.from_tensor(v, [bn, dp]))
        F._attn_fwd[(triton.cdiv(150, bm), 2)](*descs, o, 150, 2, 1.4426950408889634 / d ** 0.5, F.bucket(150),
                                               HEAD_DIM=dp, DIM=d, CAUSAL=causal, BLOCK_M=bm, BLOCK_N=bn,
                                               RAW_Q=raw_q, RAW_KV=True)

    _every_tile(d, "float32", "triton:tf32x3", F.IN_KERNEL_CONFIGS[padded_head_dim(d)], launch)


def test_attention_tf32x3_races_the_split_in_kernel_below_1024_keys(monkeypatch):
    """Below IN_KERNEL_BELOW keys the first call of a key (S's bucket, D, causal)
    tunes both forms and times them, split passes included, and keeps the faster;
    later calls of the key run it unraced; at S >= 1024 the split passes run alone."""
    from implementations.attention import _triton_tf32x3 as F

    ran, raced = [], []

    def form(name):
        def run(q, k, v, causal, out=None):
            ran.append(name)
            return torch.zeros_like(q), name
        return run

    def race(runs):
        raced.append(sorted(runs))
        for run in runs.values():
            run()
        return {False: 0.020, True: 0.012}  # ms

    monkeypatch.setattr(F, "_split_first", form("passes"))
    monkeypatch.setattr(F, "_in_kernel", form("in kernel"))
    monkeypatch.setattr(F, "interpreting", lambda: False)
    monkeypatch.setattr(F, "_FORM", {})
    from implementations._shared import autotune
    monkeypatch.setattr(autotune, "race", race)
    q = torch.randn(2, 3, 64, 128)
    o, text = F.attention(q, q, q, False)
    assert raced == [[False, True]] and text == "in kernel; raced split in kernel:12us, split passes:20us"
    ran.clear()
    assert F.attention(q[:, :, :60], q[:, :, :60], q[:, :, :60], False)[1].startswith("in kernel")
    assert ran == ["in kernel"] and len(raced) == 1  # the same key: no second race
    long = torch.randn(1, 1, 1024, 64)
    assert F.attention(long, long, long, True)[1] == "passes" and len(raced) == 1


def test_split_tf32_heads_and_tails():
    """Each head keeps float32's sign, exponent and top 10 mantissa bits (what a TF32
    MMA reads), head + tail is x exactly, and a tail is below 2^-10 of its x; V's
    split is the same, transposed, with zero keys up to a multiple of 4.  Three TF32
    products with the tails cut to TF32 as the tensor cores cut them hold attention
    well inside float32's 1e-4 (a single TF32 product does not)."""
    from implementations.attention._triton_tf32x3 import split, split_transposed

    torch.manual_seed(1)
    b, h, s, d = 2, 3, 7, 64
    x = torch.randn(b, h, s, d) * torch.logspace(-20, 20, d)
    halves = split(x)
    assert halves.shape == (2 * b * h * s, d)
    head, tail = halves[: b * h * s].view_as(x), halves[b * h * s:].view_as(x)
    assert not (head.view(torch.int32) & 0x1FFF).any()
    assert torch.equal(head + tail, x)
    assert (tail.abs() <= x.abs() * 2.0**-10).all()
    vt = split_transposed(x)
    assert vt.shape == (2 * b * h * d, 8)
    assert torch.equal(vt[: b * h * d, :s].view(b, h, d, s), head.transpose(-1, -2))
    assert torch.equal(vt[b * h * d:, :s].view(b, h, d, s), tail.transpose(-1, -2))
    assert not vt[:, s:].any()

    def tf32(t):  # the tensor cores read a float32 operand's top 10 mantissa bits
        return (t.view(torch.int32) & -8192).view(torch.float32).double()

    def mm(a, c, three):
        n = a.numel()
        (ah, at), (ch, ct) = split(a).view(2, *a.shape), split(c.contiguous()).view(2, *c.shape)
        assert ah.numel() == n
        if not three:
            return tf32(a) @ tf32(c)
        return tf32(at) @ tf32(ch) + tf32(ah) @ tf32(ct) + tf32(ah) @ tf32(ch)

    q, k, v = (torch.randn(1, 2, 96, 64) for _ in range(3))
    ref = torch.softmax(q.double() @ k.double().transpose(-1, -2) / 8.0, -1) @ v.double()
    err = []
    for three in (True, False):
        p = torch.softmax(mm(q, k.transpose(-1, -2), three) / 8.0, -1).float()
        err.append(((mm(p, v, three) - ref).norm() / ref.norm()).item())
    assert err[0] < 1e-5 < 1e-4 < err[1], err


def test_attention_race_takes_the_fastest_and_names_every_time(monkeypatch):
    """_race (sm_90 only on the GPU) with its kernels and timer replaced: the fastest
    candidate wins, a config that fails to build sits the race out, and the text
    gives every time that was taken, fastest first."""
    import implementations._shared.autotune as tuning
    from implementations.attention import _gluon_flash as G
    from implementations.attention import _triton_flash as A

    configs = ((64, 64, 3, 4, 1, 0), (128, 64, 4, 4, 1, 1), (128, 128, 2, 4, 0, 1))
    monkeypatch.setattr(G, "available", lambda q: True)
    monkeypatch.setattr(G, "CONFIGS", {64: configs})

    def gluon(q, k, v, causal, *cfg):
        if cfg == configs[2]:
            raise RuntimeError("out of shared memory")
        return cfg

    monkeypatch.setattr(G, "attention", gluon)
    monkeypatch.setattr(A, "_triton", lambda q, k, v, causal: ("triton output", "its config"))
    q = torch.randn(1, 2, 8, 64)
    for times, winner in (({None: 2e-3, configs[0]: 1e-3, configs[1]: 3e-3}, configs[0]),
                          ({None: 1e-3, configs[0]: 2e-3, configs[1]: 3e-3}, None)):
        monkeypatch.setattr(tuning, "_bench",
                            lambda run, times=times: times[None if run() == ("triton output", "its config") else run()])
        best, text = A._race(q, q, q, True)
        assert best == winner, (times, best)
        order = sorted((c for c in times), key=times.get)
        names = ["triton" if c is None else "gluon {}x{},s{},w{},q{}".format(*c[:5]) + (",ws" if c[5] else "")
                 for c in order]
        assert text == "; raced " + ", ".join(f"{n}:{times[c] * 1000:.0f}us" for n, c in zip(names, order))
        assert "128x128" not in text


def test_attention_supports():
    impl, tf32x3 = discover().get("attention", "triton"), discover().get("attention", "triton:tf32x3")
    shape = dict(B=1, H=2, S=77, D=64, causal=0)
    assert "triton:tf32x3 takes float32" in impl.supports(Case.make("attention", "float32", **shape))
    assert tf32x3.supports(Case.make("attention", "float32", **shape)) is None
    assert "float32 only" in tf32x3.supports(Case.make("attention", "bfloat16", **shape))
    assert tf32x3.math == "tf32x3"
    for d, ok in ((8, True), (96, True), (120, True), (100, False), (4, False), (136, False), (256, False)):
        for which, dtype in ((impl, "bfloat16"), (tf32x3, "float32")):
            why = which.supports(Case.make("attention", dtype, **dict(shape, D=d)))
            assert (why is None) == ok and (ok or f"head dim {d} not supported" in why), (d, why)
    for case in discover().workloads["attention"].cases("full", ("float16", "bfloat16")):
        assert impl.supports(case) is None
    # more heads than a launch's second grid axis holds run a launch per run of them
    cuda = discover().get("attention", "cuda")
    for which, dtype in ((impl, "bfloat16"), (tf32x3, "float32"), (cuda, "bfloat16")):
        assert which.supports(Case.make("attention", dtype, **dict(shape, B=32768, H=12, S=16))) is None


@pytest.mark.parametrize("impl_name,dtype", (("triton", "bfloat16"), ("triton:tf32x3", "float32")))
def test_attention_more_heads_than_a_launch_holds(impl_name, dtype, poisoned, monkeypatch):
    """B x H past head_dims.MAX_HEADS (a grid's y limit, 65535): a launch per run of
    heads, each into its slice of one output.  Here a launch holds 4 heads, so 3 x 3
    heads take three launches, the last of one head."""
    from implementations.attention import head_dims

    monkeypatch.setattr(head_dims, "MAX_HEADS", 4)
    assert head_dims.head_runs(9) == [(0, 4), (4, 8), (8, 9)]
    impl = discover().get("attention", impl_name)
    for causal in (0, 1):
        case = Case.make("attention", dtype, B=3, H=3, S=37, D=64, causal=causal)
        _run("attention", impl_name, case)  # poisoned: a head no launch wrote fails
        assert impl.config(case).endswith("; 3 launches of at most 4 heads"), impl.config(case)


def test_gpu_configs_compile_for_sm90():
    import triton

    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    if not ptxas.exists():
        pytest.skip(f"this triton install has no bundled ptxas at {ptxas}")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "sm90_compute_probe.py")], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout)
    kernels = {r["kernel"] for r in rows}
    assert {"gemm-tiled-bf16", "gemm-tiled-fp32-ieee", "gemm-tiled-fp32-tf32x3", "gemm-persistent-bf16",
            "attention-d64-causal", "attention-d128-causal", "attention-d96-causal", "attention-tf32x3-d64-causal",
            "attention-tf32x3-d128-causal", "attention-tf32x3-d96-causal", "attention-tf32x3-inkernel-d64-causal",
            "attention-tf32x3-inkernel-d128-causal", "attention-gluon-d64", "attention-gluon-d128-causal"} <= kernels
    for r in rows:
        where = f"{r['kernel']} {r['config']} warps={r['warps']} stages={r['stages']}"
        assert r["shared"] <= 227 * 1024, f"{where}: {r['shared']} bytes of shared memory"
        # the float32 attention splitting K and V as it loads them, at D = 128, spills a little
        # (IN_KERNEL_CONFIGS); it runs only where it wins its race against the split passes
        allowed = 64 if r["kernel"] == "attention-tf32x3-inkernel-d128-causal" else 0
        assert r["spill"] <= allowed, f"{where}: spills {r['spill']} bytes"
        tensor_cores = "fp32-ieee" not in r["kernel"] and r["config"]["BLOCK_M"] >= 64
        assert r["wgmma"] == tensor_cores, f"{where}: wgmma={r['wgmma']}"
        tma = any(name in r["kernel"] for name in ("persistent", "gluon", "attention-tf32x3"))
        assert r["tma"] == tma, f"{where}: tma={r['tma']}"
    # the Gluon attention waits for QK^T with P V still in flight (one group left), every config
    gluon = [r for r in rows if "gluon" in r["kernel"]]
    assert gluon and all(1 in r["wgmma_waits"] for r in gluon), [(r["kernel"], r["wgmma_waits"]) for r in gluon]
    ragged = [r for r in rows if r["kernel"] == "gemm-tiled-bf16-ragged"]
    assert ragged and all(r["cp_async16"] > 0 and r["scalar_loads"] == 0 for r in ragged), ragged
    decode = [r for r in rows if r["kernel"] == "gemm-tiled-bf16-decode"]
    assert decode and all(r["cp_async16"] > 0 for r in decode), decode
