"""The fuzz preset: seeded shapes of the sizes users run, reproduced by --seed."""
import random

import pytest
import torch

from suite import cli, shapes
from suite.runner import make_plan
from suite.workload import discover
from tests.helpers import suite_here

REG = discover()
WL = REG.workloads
SEEDS = range(1, 11)


def fuzz(name, seed):
    return WL[name].preset_shapes("fuzz", seed)


def test_the_same_seed_draws_the_same_shapes_whatever_else_was_drawn():
    first = {name: fuzz(name, 7) for name in WL}
    random.seed(123)
    random.random()
    torch.manual_seed(5)
    assert {name: fuzz(name, 7) for name in WL} == first
    for name in WL:
        assert fuzz(name, 8) != first[name], name


def test_every_workload_has_24_distinct_shapes_that_fit_beside_the_reference():
    for name, wl in WL.items():
        assert "fuzz" in wl.preset_names(), name
        for seed in SEEDS:
            cases = wl.cases("fuzz", seed=seed)
            assert {c.dtype for c in cases} == {"float32", "bfloat16"}
            assert {c.source for c in cases} == {"preset:fuzz"}
            assert len({c.label for c in cases}) == 24, (name, seed)
            # what an H200 holds beside the float64 reference, with room to spare
            shapes.check_fits(cases, WL, "cuda", free=16 << 30)


def test_fuzz_size_stays_in_range_and_is_mostly_awkward():
    rng = random.Random(1)
    drawn = [shapes.fuzz_size(rng, 100, 9000) for _ in range(2000)]
    assert all(100 <= x <= 9000 for x in drawn)
    assert sum(x % 8 != 0 for x in drawn) > 0.5 * len(drawn)
    assert sum(shapes.is_prime(x) for x in drawn) > 0.3 * len(drawn)
    assert any(x % 128 == 0 for x in drawn) and any(x % 8 == 0 and x % 64 for x in drawn)
    assert {shapes.fuzz_size(rng, 1, 1) for _ in range(20)} == {1}
    assert [n for n in range(30) if shapes.is_prime(n)] == [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]


def _all(name):
    return [s for seed in SEEDS for s in fuzz(name, seed)]


def test_memory_bound_shapes_span_launch_bound_to_hundreds_of_mib():
    for name in ("gelu", "softmax", "residual_layernorm_gelu"):
        wl = WL[name]
        for seed in SEEDS:
            cases = wl.cases("fuzz", ["float32"], seed=seed)
            traffic = [wl.min_bytes(c) for c in cases]
            assert max(traffic) <= 300 << 20, name  # keeps a sweep's time bounded
            assert sum(t >= 64 << 20 for t in traffic) >= 1, (name, seed)  # the targets' large shapes
        dims = [v for s in _all(name) for v in s.values()]
        assert sum(v % 8 != 0 for v in dims) > len(dims) / 3, name
    rows = _all("softmax")
    assert sum(32000 <= s["N"] <= 152064 for s in rows) >= len(rows) // 4 - 1  # vocabulary rows
    assert any(s["N"] <= 1024 for s in rows) and any(s["N"] > 16384 for s in rows)
    assert any(s["M"] <= 16 for s in _all("residual_layernorm_gelu"))


def test_gemm_has_decode_skinny_and_large_awkward_products():
    got = _all("gemm")
    assert all(s["M"] * s["N"] * s["K"] <= 1 << 38 and max(s.values()) <= 8192 for s in got)
    assert sum(s["M"] <= 16 for s in got) >= len(got) // 4
    assert any(17 <= s["M"] <= 512 for s in got)
    large = [s for s in got if min(s.values()) >= 1024]
    assert len(large) >= len(got) // 4
    for mult in (8, 64, 128):
        assert sum(any(v % mult for v in s.values()) for s in large) > len(large) / 2, mult


def test_attention_covers_head_dims_masks_and_unblocked_lengths():
    got = _all("attention")
    assert {s["D"] for s in got} == {64, 128} and {s["causal"] for s in got} == {0, 1}
    assert all(4 * s["B"] * s["H"] * s["S"] ** 2 * s["D"] <= 1 << 41 for s in got)
    assert max(s["S"] for s in got) <= 8192 and sum(s["S"] >= 1024 for s in got) >= len(got) // 2
    assert sum(s["S"] % 16 != 0 for s in got) > len(got) / 2


def test_the_plan_runs_the_seeds_shapes(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    args = cli.build_parser("run").parse_args(["run", "--device", "cuda", "--preset", "fuzz", "--seed", "3",
                                               "--workloads", "gemm", "--impls", "torch", "--dtypes", "bfloat16"])
    plan = make_plan(args, REG)
    assert [c for c, _ in plan.cases] == WL["gemm"].cases("fuzz", ["bfloat16"], seed=3)
    assert {c.source for c, _ in plan.cases} == {"preset:fuzz"}


def test_the_fuzz_preset_is_sized_for_a_gpu():
    r = suite_here("run", "--device", "cpu", "--preset", "fuzz", "--seed", "1", "--workloads", "gelu")
    assert r.returncode == 2 and "sized for a GPU" in r.stderr


# What a backend has no kernel for at all, whatever the shape.
NO_KERNEL = {("attention", "cuda", "float32")}  # FlashAttention-2, the CUDA target's peer, has none either


def test_every_backend_takes_every_fuzz_shape_in_its_dtypes():
    """Shapes of seeds no run has used (the held-out kind): for each dtype some
    implementation of the Triton and of the CUDA backend supports every one, so
    a sweep of new shapes gets times, not `unsupported` rows."""
    for name, wl in WL.items():
        impls = REG.for_workload(name)
        for backend in ("triton", "cuda"):
            ours = [i for i in impls if i.backend == backend]
            for dtype in ("float32", "bfloat16", "float16"):
                if (name, backend, dtype) in NO_KERNEL:
                    continue
                for seed in range(101, 121):
                    for case in wl.cases("fuzz", [dtype], seed=seed):
                        reasons = [i.supports(case) for i in ours]
                        assert None in reasons, f"{backend} {case} seed {seed}: {reasons}"
