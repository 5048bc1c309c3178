import math

import torch

from suite import verify


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
    assert not c.correct and "NaN" in c.message


def test_shape_mismatch_and_non_tensor_fail():
    ref = torch.randn(4, 5, dtype=torch.float64)
    assert not verify.check(ref.reshape(5, 4), ref, 1.0).correct
    assert not verify.check(None, ref, 1.0).correct


def test_poisoned_output_that_is_never_written_fails():
    ref = torch.randn(64, dtype=torch.float64)
    out = verify.poison_(torch.empty(64))
    out[:32] = ref[:32].float()  # half written
    assert not verify.check(out, ref, 1e-3).correct
