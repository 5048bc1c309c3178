"""Nsight Compute and the energy counter on the GPU: one real replay, parsed, against the timer.

Skipped without ncu.  The raw CSV it leaves in the test's folder is the
layout tests/ncu_data/ mirrors; a recorded one can be copied there.
"""
from __future__ import annotations

import math

import pytest

from suite import clocks, energy, ncu, replay
from suite.workload import Case, discover

pytestmark = pytest.mark.gpu


@pytest.mark.skipif(ncu.find_ncu() is None, reason="ncu not found")
def test_a_real_replay_has_one_kernel_per_call_near_the_events_time(tmp_path):
    import torch

    from suite.timing import measure

    reg = discover()
    case = Case.make("gelu", "float32", N=1 << 26)
    impl = reg.get("gelu", "triton")
    inputs = reg.workloads["gelu"].make_inputs(case, "cuda", 7)
    impl.fn(**inputs)
    ms = measure([lambda: impl.fn(**inputs)], "cuda", "events").median
    spec = replay.spec(case, "triton", 7, (), torch.cuda.current_device(), ncu.WARMUP, ncu.CALLS,
                       "cold-clean")
    row = ncu.profile(spec, tmp_path, "gelu-triton", ms)
    assert row["ncu_error"] is None, row["ncu_error"]
    assert row["ncu_kernels"] == 1
    assert 0.9 < row["ncu_ratio"] < 1.1, (row["ncu_ms"], ms)
    assert row["ncu_dram_pct"] > 50 and row["ncu_dram_bytes"] == pytest.approx(2 * 4 << 26, rel=0.05)
    assert row["ncu_regs"] > 0 and row["ncu_top_kernel"]
    assert (tmp_path / "gelu-triton.csv").is_file()


def test_the_energy_counter_moves_over_a_burst():
    import torch

    counter = clocks.energy_counter("cuda")
    if counter is None:
        pytest.skip("no NVML energy counter")
    x = torch.randn(1 << 26, device="cuda")
    got = energy.burst(lambda: x.mul_(1.0), torch.cuda.synchronize, counter, ms_per_call=0.2)
    assert got["energy_calls"] >= 1
    assert 50 < got["energy_w"] < 1500 and not math.isnan(got["energy_j"])
