"""The K split of gemm_skinny as implementations/gemm/cuda/__init__.py mirrors
it for the `config` column (the kernel's own rule is split_rows in
gemm_skinny.cu): figures worked out by hand from that rule, a brute-force
search for the largest split count the rule allows, and the invariants the
kernel relies on."""
from __future__ import annotations

import pytest

from implementations.gemm.cuda import SKINNY_KMIN, SKINNY_KROUND, skinny_blocks_per_sm, skinny_plan


@pytest.mark.parametrize("m,n,k,sms,per_sm,want", [
    # 6 column blocks, a wave of 264 allows 44 splits; 808 // 64 = 12; 12^2 * 5 <= 808:
    # 12 splits of 68 rows, rounded up to 72 (the last 16)
    (5, 1536, 808, 132, 2, (72, 12)),
    # 8 column blocks: 33 splits (33^2 * 5 = 5445 <= 5888), 179 rows -> 184, 32 splits
    (5, 2048, 5888, 132, 2, (184, 32)),
    # 30 column blocks: 8 splits fill the wave, but 281 // 64 = 4: 71 rows -> 72
    (8, 7577, 281, 132, 2, (72, 4)),
    # one block an SM: 16 splits of 368 rows
    (16, 2048, 5888, 132, 1, (368, 16)),
    # one column block: 132 would fill the wave, 46 give 64 rows each, but
    # 14^2 * 16 > 3000 >= 13^2 * 16: 13 splits of 231 -> 232 rows
    (16, 256, 3000, 132, 1, (232, 13)),
    # four blocks an SM: 33 splits, 497 rows -> 504
    (1, 4096, 16384, 132, 4, (504, 33)),
    # K shorter than the 64-row minimum: one split
    (1, 8, 7, 132, 4, (8, 1)),
    # more column blocks (265) than the wave: one split over the whole K
    (4, 67592, 300, 132, 2, (304, 1)),
    # a smaller GPU: a wave of 32 over 6 column blocks, 5 splits of 690 -> 696 rows
    (3, 1288, 3449, 16, 2, (696, 5)),
])
def test_skinny_plan_figures(m, n, k, sms, per_sm, want):
    assert skinny_plan(m, n, k, sms, per_sm) == want


def test_blocks_per_sm_follow_the_register_budget():
    # MB = 1, 2: four blocks; 4, 8: two; 16: one (kMinBlocks in gemm_skinny.cu)
    assert [skinny_blocks_per_sm(m) for m in range(1, 17)] == [4, 4] + [2] * 6 + [1] * 8


def _largest_split(m, n, k, sms, per_sm):
    """The largest split count the rule allows, by search: one wave, each
    split at least SKINNY_KMIN rows, splits^2 * m <= k; else 1."""
    col_blocks = -(-n // 256)
    ok = [s for s in range(1, k // SKINNY_KMIN + 1)
          if s * col_blocks <= sms * per_sm and s * s * m <= k]
    return max(ok, default=1)


@pytest.mark.parametrize("per_sm", (1, 2, 4))
@pytest.mark.parametrize("m", (1, 2, 3, 5, 8, 13, 16))
@pytest.mark.parametrize("n", (1, 7, 256, 1288, 7577, 70000))
@pytest.mark.parametrize("k", (1, 63, 64, 65, 281, 808, 3449, 5888))
def test_skinny_plan_invariants(m, n, k, per_sm):
    sms = 132
    rows, splits = skinny_plan(m, n, k, sms, per_sm)
    assert rows % SKINNY_KROUND == 0 and rows > 0
    # every split has rows of K, the last possibly fewer, none empty
    assert (splits - 1) * rows < k <= splits * rows
    col_blocks = -(-n // 256)
    if splits > 1:
        assert col_blocks * splits <= sms * per_sm  # one wave
        assert rows >= SKINNY_KMIN                    # a group of 8 rows for every warp
        assert splits * splits * m <= k               # the last block's partials stay short
    # the largest count allowed, less at most what rounding rows up to 8 takes off
    best = _largest_split(m, n, k, sms, per_sm)
    assert rows == -(-(-(-k // best)) // SKINNY_KROUND) * SKINNY_KROUND
    assert splits <= best


@pytest.mark.parametrize("m,n,k,sms,want", [
    # 24 column blocks of 64: a wave of 264 allows 11 splits; 808 // 256 = 3: 270 rows -> 288,
    # so 3 splits (288, 288, 232)
    (5, 1536, 808, 132, (288, 3)),
    # 32 column blocks: 8 splits (8^2 * 5 <= 5888), 736 rows (a multiple of 32)
    (5, 2048, 5888, 132, (736, 8)),
    # 64 column blocks: 4 splits of 3584 rows (4^2 * 16 <= 14336)
    (16, 4096, 14336, 132, (3584, 4)),
    # 128 column blocks, a wave of 264: 2 splits of 4096
    (1, 8192, 8192, 132, (4096, 2)),
    # more column blocks than the wave (2004): one split over the whole K
    (8, 128256, 4096, 132, (4096, 1)),
    # K shorter than one slot for each warp (256 rows): one split, rows rounded up to 32
    (3, 512, 200, 132, (224, 1)),
])
def test_skinny_mma_plan_figures(m, n, k, sms, want):
    from implementations.gemm.cuda import skinny_mma_plan

    assert skinny_mma_plan(m, n, k, sms) == want


@pytest.mark.parametrize("m", (1, 5, 16))
@pytest.mark.parametrize("n", (8, 64, 1536, 4096, 128256))
@pytest.mark.parametrize("k", (1, 31, 257, 4096, 14336))
def test_skinny_mma_plan_covers_k_in_one_wave(m, n, k):
    from implementations.gemm.cuda import SKINNY_MMA_PER_SM, skinny_mma_plan

    rows, splits = skinny_mma_plan(m, n, k, 132)
    assert rows % 32 == 0 and rows * splits >= k > rows * (splits - 1)
    assert splits == 1 or -(-n // 64) * splits <= 132 * SKINNY_MMA_PER_SM
    assert splits == 1 or splits * splits * m <= k


@pytest.mark.parametrize("m,n,k,sms,want", [
    # 72 column blocks of 64 on 132 SMs: no SM left for a second split
    (16, 4608, 3584, 132, (3584, 1)),
    # 24 column blocks: 5 splits would fit, 808 // 256 = 3: 270 rows -> 384, so 3 splits (384, 384, 40)
    (5, 1536, 808, 132, (384, 3)),
    # 55 column blocks: 2 splits of 2612 rows -> 2688 (21 stages), the second 2536
    (12, 3496, 5224, 132, (2688, 2)),
    # 4 column blocks: 33 would fit, 3000 // 256 = 11 and 11^2 * 16 <= 3000: 273 rows -> 384, 8 splits
    (16, 256, 3000, 132, (384, 8)),
    # K shorter than two stages: one split, rows rounded up to a stage
    (3, 512, 200, 132, (256, 1)),
    # more column blocks than SMs: one split
    (1, 8192, 8192, 132, (8192, 1)),
])
def test_skinny_tma_plan_figures(m, n, k, sms, want):
    from implementations.gemm.cuda import skinny_tma_plan

    assert skinny_tma_plan(m, n, k, sms) == want


@pytest.mark.parametrize("m", (1, 5, 16))
@pytest.mark.parametrize("n", (8, 64, 1536, 4096, 128256))
@pytest.mark.parametrize("k", (8, 128, 264, 4096, 14336))
def test_skinny_tma_plan_one_cta_an_sm(m, n, k):
    from implementations.gemm.cuda import skinny_tma_plan

    rows, splits = skinny_tma_plan(m, n, k, 132)
    assert rows % 128 == 0 and rows * splits >= k > rows * (splits - 1)
    assert splits == 1 or (-(-n // 64) * splits <= 132 and rows >= 256 and splits * splits * m <= k)
