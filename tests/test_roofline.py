"""Bytes, FLOPs and roofline arithmetic against numbers worked out by hand."""
import math

import pytest

from suite import roofline
from suite.workload import Case, discover

REG = discover()


def wl(name):
    return REG.workloads[name]


def test_softmax_bf16_4096_square_moves_64_mib():
    case = Case.make("softmax", "bfloat16", M=4096, N=4096)
    assert wl("softmax").min_bytes(case) == 2 * 4096 * 4096 * 2
    # eager: max, sub, exp, sum, div = 8MN + 4M elements
    assert wl("softmax").eager_bytes(case) == (8 * 4096 * 4096 + 4 * 4096) * 2


def test_gelu_bytes_and_predicted_fusion():
    case = Case.make("gelu", "float32", N=1 << 28)
    assert wl("gelu").min_bytes(case) == 2 * 4 * 2**28  # 2 GiB
    assert wl("gelu").eager_bytes(case) / wl("gelu").min_bytes(case) == pytest.approx(5.5)


def test_layernorm_bytes():
    case = Case.make("residual_layernorm_gelu", "bfloat16", M=32768, N=4096)
    mn = 32768 * 4096
    assert wl("residual_layernorm_gelu").min_bytes(case) == (3 * mn + 2 * 4096) * 2
    assert wl("residual_layernorm_gelu").eager_bytes(case) == (7 * mn + 2 * 4096) * 2 + 2 * 32768 * 4


def test_gemm_flops_bytes_and_no_fusion_gain():
    case = Case.make("gemm", "bfloat16", M=8192, N=8192, K=8192)
    g = wl("gemm")
    assert g.flops(case) == 2 * 8192**3
    assert g.min_bytes(case) == 3 * 8192 * 8192 * 2
    assert g.eager_bytes(case) == g.min_bytes(case)
    assert roofline.intensity(g.flops(case), g.min_bytes(case)) == pytest.approx(8192 / 3)


def test_attention_flops_halve_when_causal():
    a = wl("attention")
    full = Case.make("attention", "bfloat16", B=4, H=32, S=4096, D=128, causal=0)
    causal = Case.make("attention", "bfloat16", B=4, H=32, S=4096, D=128, causal=1)
    assert a.flops(full) == 4 * 4 * 32 * 4096**2 * 128
    assert a.flops(causal) == a.flops(full) / 2
    assert a.min_bytes(full) == 4 * 4 * 32 * 4096 * 128 * 2


def test_bound_and_sol():
    # 1 GB at 1000 GB/s is 1 ms; 1 TFLOP at 100 TFLOP/s is 10 ms: compute bound
    assert roofline.memory_ms(1e9, 1000) == pytest.approx(1.0)
    assert roofline.compute_ms(1e12, 100) == pytest.approx(10.0)
    assert roofline.bound_ms(1e12, 1e9, 1000, 100) == pytest.approx(10.0)
    assert roofline.limiter(1e12, 1e9, 1000, 100) == "compute"
    assert roofline.sol(10.0, 12.5) == pytest.approx(0.8)
    assert roofline.gbps(2e9, 1.0) == pytest.approx(2000.0)
    assert roofline.tflops(1e12, 10.0) == pytest.approx(100.0)
    assert roofline.ridge_point(4000, 800) == pytest.approx(200.0)
    assert math.isnan(roofline.sol(1.0, 0.0))


def test_every_workload_predicts_fusion_no_worse_than_one():
    for w in REG.workloads.values():
        for preset in w.presets:
            for case in w.cases(preset):
                assert w.eager_bytes(case) >= w.min_bytes(case) > 0
                assert w.flops(case) > 0


def test_mix_bandwidth_interpolates_time_per_byte_between_measured_mixes():
    measured = {0.0: 3000.0, 0.5: 4000.0, 2 / 3: 4400.0, 1.0: 4600.0}
    assert roofline.mix_gbps(1, 1, measured) == 4000.0  # copy
    assert roofline.mix_gbps(2, 1, measured) == pytest.approx(4400.0)  # 2:1
    assert roofline.mix_gbps(1, 0, measured) == 4600.0 and roofline.mix_gbps(0, 5, measured) == 3000.0
    # 3:1 (read fraction 3/4) lies a quarter of the way from 2:1 to read-only: time per byte
    # is interpolated, not GB/s
    assert roofline.mix_gbps(3, 1, measured) == pytest.approx(1 / (0.75 / 4400 + 0.25 / 4600))
    # a missing mix is skipped, none at all gives nan
    assert roofline.mix_gbps(2, 1, {0.5: 4000.0, 1.0: 4600.0, 2 / 3: float("nan")}) == pytest.approx(
        1 / ((2 / 3) / 4000 + (1 / 3) / 4600))
    assert math.isnan(roofline.mix_gbps(1, 1, {}))


def test_only_a_cold_row_above_its_roof_is_suspect():
    assert roofline.SUSPECT_SOL == 1.02
    why = roofline.suspect_reason(1.04, "cold-clean", "memory", 4400.0, 60.0, "for 67% reads")
    assert why == ("SOL 1.040 > 1.02 of its memory roof (4400 GB/s for 67% reads): the roof or the "
                   "check is wrong")
    assert "494.0 TFLOP/s tf32" in roofline.suspect_reason(1.1, "cold-rotate", "compute", 4400.0, 494.0,
                                                            math_mode="tf32")
    assert roofline.suspect_reason(1.019, "cold-clean", "memory", 4400.0, 60.0) is None
    for l2 in ("warm", "n/a", None):
        assert roofline.suspect_reason(3.0, l2, "memory", 4400.0, 60.0) is None


def test_the_matmul_roof_is_the_best_of_its_shapes(monkeypatch):
    """As a bandwidth roof is the best of its forms: the library's best kernel differs
    by shape, and a roof one shape sets can be beaten by another (suspect rows)."""
    from suite import ceilings

    shapes = ceilings.matmul_shapes(gpu=True)
    assert shapes[0] == (8192, 8192, 8192) and len(set(shapes)) == 3
    assert len({m * n * k for m, n, k in shapes}) == 1  # the same work each
    seen = []

    def rate(m, n, k, dtype, device):
        seen.append((m, n, k))
        return {shapes[0]: 700.0, shapes[1]: 720.0, shapes[2]: 690.0}.get((m, n, k), 1.0)

    monkeypatch.setattr(ceilings, "_matmul_tflops", rate)
    monkeypatch.setattr(ceilings, "_bandwidths", lambda device, timed: {
        "read_gbps": 1.0, "write_gbps": 1.0, "copy_gbps": 1.0, "mix21_gbps": 1.0})
    monkeypatch.setattr(ceilings, "matmul_shapes", lambda gpu: shapes)
    c = ceilings.measure("cpu", "fp", "cpu")
    assert c.matmul_tflops == {name: 720.0 for name in ceilings.MATMUL_DTYPES}
    assert seen == list(shapes) * len(ceilings.MATMUL_DTYPES)
