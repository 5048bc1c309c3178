"""Without a GPU the CUDA backend says so and never tries to build."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from implementations._shared import cuda_ext, cuda_variants, row_plans
from suite import cuda_build
from suite.workload import discover

# every workload has a CUDA backend; the test covers whatever is registered
EXPECTED = {("gelu", "cuda"), ("gelu", "cuda:scalar"), ("residual_layernorm_gelu", "cuda"),
            ("softmax", "cuda"), ("gemm", "cuda"), ("gemm", "cuda:naive"), ("gemm", "cuda:tf32x3"),
            ("gemm", "cuda:wgmma"), ("attention", "cuda")}


def test_cpu_device_is_unavailable():
    assert cuda_build.cuda_available("cpu") == "needs a CUDA GPU"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_no_gpu_reports_unavailable_without_building(monkeypatch):
    def no_build(*args, **kwargs):
        raise AssertionError("tried to build a CUDA extension on a machine without a GPU")

    monkeypatch.setattr(cuda_build, "load", no_build)
    monkeypatch.setattr("torch.utils.cpp_extension.load", no_build)
    registry = discover()
    cuda_impls = {key for key, impl in registry.impls.items() if impl.backend == "cuda"}
    assert EXPECTED <= cuda_impls
    for wl, name in sorted(cuda_impls):
        assert (wl, "cuda") not in registry.broken, registry.broken[(wl, "cuda")]
        impl = registry.get(wl, name)
        for device in ("cuda", "cpu"):
            reason = impl.check_available(device)
            assert reason, f"{wl}/{name} claims to be available on {device} without a GPU"
    assert not any(cuda_build.is_loaded(n) for n in registry.workloads)


def test_flags_are_defined_once_and_precise():
    # No fast math (see the comment in cuda_build); the debug switch swaps -O3 for -G -O0.
    assert "--use_fast_math" not in cuda_build.COMMON_CUDA_FLAGS
    assert {"-O3", "-lineinfo", "-std=c++17"} <= set(cuda_build.COMMON_CUDA_FLAGS)
    assert {"-G", "-O0"} <= set(cuda_build.DEBUG_CUDA_FLAGS)


def test_debug_switch_and_hopper_arch(monkeypatch):
    monkeypatch.setattr("torch.cuda.get_device_capability", lambda *a: (9, 0))
    monkeypatch.delenv("KSUITE_CUDA_DEBUG", raising=False)
    cuda, _ = cuda_build.build_flags()
    assert "-O3" in cuda and "-G" not in cuda
    assert "-gencode=arch=compute_90,code=sm_90" in cuda
    assert "-gencode=arch=compute_90a,code=sm_90a" in cuda_build.build_flags(hopper=True)[0]
    monkeypatch.setenv("KSUITE_CUDA_DEBUG", "1")
    cuda, cxx = cuda_build.build_flags()
    assert {"-G", "-O0"} <= set(cuda) and "-O3" not in cuda and "-O0" in cxx
    monkeypatch.setattr("torch.cuda.get_device_capability", lambda *a: (8, 0))
    with pytest.raises(RuntimeError, match="sm_90"):
        cuda_build.build_flags(hopper=True)


def test_cache_key_follows_sources_and_flags(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text("// v1\n")
    key = cuda_build._fingerprint([src], ["-O3"])
    assert key == cuda_build._fingerprint([src], ["-O3"])
    assert key != cuda_build._fingerprint([src], ["-O0"])
    (tmp_path / "k.cuh").write_text("// a header beside the source\n")
    with_header = cuda_build._fingerprint([src], ["-O3"])
    assert with_header != key
    src.write_text("// v2\n")
    assert cuda_build._fingerprint([src], ["-O3"]) != with_header


def test_cache_key_follows_headers_under_include_dirs(tmp_path):
    src = tmp_path / "src" / "k.cu"
    src.parent.mkdir()
    src.write_text("// v1\n")
    inc = tmp_path / "include"
    (inc / "lib").mkdir(parents=True)
    header = inc / "lib" / "helpers.cuh"
    header.write_text("// v1\n")
    key = cuda_build._fingerprint([src], ["-O3"], [inc])
    assert key != cuda_build._fingerprint([src], ["-O3"])
    header.write_text("// v2\n")
    assert cuda_build._fingerprint([src], ["-O3"], [inc]) != key


def test_workload_builds_put_the_shared_headers_on_the_include_path(monkeypatch):
    seen = {}

    def fake_load(name, sources, hopper=False, fakes=None, include_dirs=()):
        seen[name] = list(include_dirs)
        return "ops"

    monkeypatch.setattr(cuda_build, "load", fake_load)
    extra = Path("/somewhere/else")
    assert cuda_ext.load("k", [], include_dirs=[extra]) == "ops"
    assert seen["k"] == [cuda_ext.INCLUDE_DIR, extra]
    assert (cuda_ext.INCLUDE_DIR / "ksuite" / "common.cuh").is_file()


@pytest.mark.parametrize("n,size,staged,plan", [
    (1, 4, 4, "registers: 1 lanes"), (781, 4, 4, "registers: block of 128"),
    (128, 2, 2, "registers: 4 lanes"), (8195, 4, 4, "cluster of 1 "),
    (16384, 2, 2, "registers: block of 512"), (32768, 2, 2, "registers: block of 1024"),
    (32768, 2, 4, "registers: block of 1024"), (131072, 4, 4, "cluster of 8 "),
    (600_000, 4, 4, "two reads")])
def test_row_plan_picks_the_plan_by_row_width(n, size, staged, plan):
    assert row_plans.row_plan(n, size, staged).startswith(plan)


A100 = cuda_variants.Limits(8, 166912)  # sm_80: no clusters, 163 KB of opt-in shared memory a block


def test_without_a_gpu_the_row_plans_describe_an_h200():
    assert cuda_variants.device() == cuda_variants.H200 and cuda_variants.H200.clusters


def test_before_sm_90_no_cluster_or_tma_plan_is_timed_or_named(monkeypatch):
    """The .cu launchers refuse clusters and TMA before sm_90 and run the automatic
    plan instead, so the tuners must not time those plans there as designs of
    their own (nor name one as the winner), and the automatic plan's text must
    say what runs."""
    import implementations.residual_layernorm_gelu.cuda as rlg
    import implementations.softmax.cuda as softmax
    from suite.workload import Case

    widths = (7, 609, 1000, 4096, 8192, 19379, 32768, 90533, 131072, 262144)
    on_h200 = {(mod.__name__, d, n, v) for mod, count in ((softmax, 37), (rlg, 22))
               for d in ("float32", "bfloat16") for n in widths for v in range(count)
               if mod._runs(v, d, n, 1)}
    monkeypatch.setattr(cuda_variants, "device", lambda: A100)
    for mod, count in ((softmax, 37), (rlg, 22)):
        for d in ("float32", "bfloat16"):
            for n in widths:
                runs = {v for v in range(count) if mod._runs(v, d, n, 1)}
                assert runs, (mod.__name__, d, n)  # something is always timed
                assert not runs & mod._SM90, (mod.__name__, d, n, runs & mod._SM90)
                # the plans that need no cluster run as on the H200
                assert runs - {0} == {v for v in range(count) if v not in mod._SM90 and v != 0
                                      and (mod.__name__, d, n, v) in on_h200}, (mod.__name__, d, n)
    # rows too long for registers: two reads (softmax); rlg's row in one CTA's shared memory
    # while it fits as float, then two reads
    assert softmax._plan(131072, 2).startswith("two reads")
    assert softmax._plan(90533, 2).startswith("two reads")
    assert softmax._runs(0, "bfloat16", 90533, 1)  # auto's own design there: no plan 36
    case = lambda n: Case.make("residual_layernorm_gelu", "bfloat16", M=64, N=n)  # noqa: E731
    assert rlg._auto_plan(case(19379)).startswith("one 1024-thread CTA a row")
    assert rlg._auto_plan(case(65536)).startswith("two reads")
    monkeypatch.setattr(cuda_variants, "device", lambda: cuda_variants.H200)
    assert softmax._plan(131072, 2).startswith("cluster of 4")
    assert rlg._auto_plan(case(19379)).startswith("cluster of")


ADA = cuda_variants.Limits(8, 101376)  # sm_89 (L40S, RTX 4090): 99 KB a block


def test_tiles_that_do_not_fit_the_devices_shared_memory_are_not_timed(monkeypatch):
    """A tile's shared memory past the device's opt-in fails at launch, which would make
    the tuner's probe, and so the case, an error: only tiles that fit are timed."""
    import implementations.attention.cuda as attention
    import implementations.gemm.cuda as gemm

    # the mirrors agree with the sizes the .cu files state (gemm_mma.cu's table, in KiB)
    assert [gemm.tile_smem(t) // 1024 for t in range(10)] == [74, 106, 153, 159, 105, 204, 159, 153, 204, 105]
    assert attention.smem(128, 0) == (128 + 2 * 2 * 64) * 136 * 2
    monkeypatch.setattr(gemm, "_sms", lambda: 132)
    monkeypatch.setattr(gemm, "_hopper", lambda: False)
    key = ("bfloat16", 1, 1, 256)  # 128 x 128 x 8192: every tile's plan splits K
    timed = {}
    for name, limits in (("h200", cuda_variants.H200), ("a100", A100), ("ada", ADA)):
        monkeypatch.setattr(cuda_variants, "device", lambda limits=limits: limits)
        timed[name] = ({t for t in gemm.TILES if gemm._runs(t, key)},
                       {d: {v for v in range(len(attention.VARIANTS[d])) if attention._TUNERS[d].runs(v, None)}
                        for d in attention.VARIANTS})
    whole_k = gemm.WHOLE_K_FIRST
    assert timed["h200"][0] == set(range(10)) | set(range(whole_k, whole_k + 10))
    assert timed["a100"][0] == timed["h200"][0] - {5, 8, whole_k + 5, whole_k + 8}
    assert timed["ada"][0] == {0, whole_k}
    assert all(timed[name][1][d] == set(range(len(attention.VARIANTS[d]))) for name in ("h200", "a100")
               for d in attention.VARIANTS)
    assert timed["ada"][1] == {128: {3, 4}, 96: {0, 2, 3}, 64: {0, 1, 2, 3}}


def test_the_mma_sync_3xtf32_gemm_is_unavailable_where_its_tile_does_not_fit(monkeypatch):
    import implementations.gemm.cuda as gemm

    monkeypatch.setattr(cuda_ext, "cuda_available", lambda device: None)
    monkeypatch.setattr(gemm, "_hopper", lambda: False)
    for limits, expect in ((A100, None), (ADA, "needs 107520 bytes of shared memory a block; this GPU "
                                               "offers 101376"),
                           (cuda_variants.Limits(7, 65536), "needs TF32 tensor cores (sm_80 or newer)")):
        monkeypatch.setattr(cuda_variants, "device", lambda limits=limits: limits)
        got = gemm._tf32x3_available("cuda")
        assert (got is None) if expect is None else (got or "").startswith(expect), (limits, got)


def test_the_gelu_plans_count_the_devices_sms(monkeypatch):
    """A small input is cut into blocks until every SM has two programs: of this GPU."""
    from implementations.gelu import triton as gelu

    n = 132 * 2 * 2048  # float32: 2048-element blocks give the H200's SMs two programs each
    assert gelu.plan(n, 4) == (2048, 4)
    monkeypatch.setattr(cuda_variants, "device", lambda: cuda_variants.Limits(10, 232448, 148))
    assert gelu.plan(n, 4) == (1024, 4)


def test_a_tensors_limits_are_a_cached_lookup(monkeypatch):
    """limits_of serves a launcher's every call: a CPU tensor gets the H200's, a CUDA
    one its device's, read once a device."""
    calls = []
    assert cuda_variants.limits_of(torch.empty(1).device) == cuda_variants.H200

    def fake(index):
        calls.append(index)
        return cuda_variants.Limits(8, 101376, 58)

    cached = cuda_variants.functools.lru_cache(maxsize=None)(fake)
    monkeypatch.setattr(cuda_variants, "_limits", cached)
    for _ in range(3):
        assert cuda_variants.limits_of(torch.device("cuda", 1)).sms == 58
    assert calls == [1]
