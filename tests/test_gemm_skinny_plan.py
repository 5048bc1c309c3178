"""The K split of gemm_skinny as implementations/gemm/cuda/__init__.py mirrors
it for the `config` column (the kernel's own rule is split_rows in
gemm_skinny.cu): figures worked out by hand from that rule, and the
invariants the kernel relies on."""
from __future__ import annotations

import pytest

from implementations.gemm.cuda import SKINNY_KMIN, SKINNY_KROUND, skinny_plan


@pytest.mark.parametrize("m,n,k,sms,want", [
    # 6 column blocks want 44 splits: 79 rows, rounded up to 80
    (3, 1288, 3449, 132, (80, 44)),
    # 20 column blocks want 14 splits (the 208-row minimum allows 22): 340 -> 344 rows
    (13, 5120, 4751, 132, (344, 14)),
    # 30 column blocks want 9 splits; the 128-row minimum (16 * 8) allows only 2
    (8, 7577, 281, 132, (144, 2)),
    # K shorter than the 64-row minimum: one split
    (1, 8, 7, 132, (8, 1)),
    # 256 column blocks want 2 splits
    (16, 65536, 4096, 132, (2048, 2)),
    # 10 column blocks want 27 splits, the 64-row minimum allows 22: 65 -> 72 rows, 20 splits
    (2, 2379, 1427, 132, (72, 20)),
    # more column blocks than 2 per SM: one split over the whole K
    (4, 67592, 300, 132, (304, 1)),
    # a smaller GPU wants fewer splits
    (3, 1288, 3449, 16, (576, 6)),
])
def test_skinny_plan_figures(m, n, k, sms, want):
    assert skinny_plan(m, n, k, sms) == want


@pytest.mark.parametrize("m", (1, 2, 3, 5, 8, 13, 16))
@pytest.mark.parametrize("n", (1, 7, 256, 1288, 7577, 70000))
@pytest.mark.parametrize("k", (1, 63, 64, 65, 281, 3449, 5888))
def test_skinny_plan_invariants(m, n, k):
    rows, splits = skinny_plan(m, n, k, 132)
    assert rows % SKINNY_KROUND == 0 and rows > 0
    # every split has rows of K, the last possibly fewer, none empty
    assert (splits - 1) * rows < k <= splits * rows
    col_blocks = -(-n // 256)
    # about two blocks per SM at most, and no split shorter than the minimum
    assert splits == 1 or col_blocks * splits < 2 * 132 + col_blocks
    assert splits == 1 or rows >= max(SKINNY_KMIN, 16 * m)
