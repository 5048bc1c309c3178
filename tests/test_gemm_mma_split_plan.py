"""The split-K plan of gemm_mma as implementations/gemm/cuda/__init__.py
mirrors it (split_plan; the kernel's own rule is split_slices in
gemm_mma.cu): the figures at the shapes that run far from cuBLAS without a
split, worked from the rule, and the properties the kernel and its
workspace rely on, over many seeded random shapes, against a search for the
cheapest count of the same cost model written out separately."""
from __future__ import annotations

import random

import pytest

from implementations.gemm.cuda import (SPLIT_GUARDED_KTILE, SPLIT_MIN_KTILES, TILE_SHAPES, split_plan,
                                       split_text)

SMS = 132  # an H200


def _plan(m, n, k, tile, aligned, sms=SMS):
    return split_plan(m, n, k, tile, aligned, sms, TILE_SHAPES[tile if aligned else 0][3])


@pytest.mark.parametrize("m,n,k,tile,aligned,want", [
    # guarded (K or N odd): tile 0, a wave of 264; small M: the partials
    # hold only the fragments inside M, so many slices pay
    (27, 256, 5959, 0, False, 38),
    (101, 911, 3719, 0, False, 17),
    (256, 179, 1813, 0, False, 10),
    (32, 768, 1877, 0, False, 12),
    (333, 717, 3697, 0, False, 13),
    (479, 241, 1584, 0, False, 10),
    (39, 2376, 6711, 0, False, 13),   # 19 tiles: one wave allows 13
    (67, 1928, 4493, 0, False, 16),   # 16 tiles: one wave allows 16
    # aligned: tile 4 (8 tiles, 91 k-tiles of 64) and the 128x256 tile 2
    (403, 256, 5768, 4, True, 7),
    (403, 256, 5768, 2, True, 7),
    # tiles filling more than half a wave: no split
    (4096, 4096, 4096, 4, True, 1),
    (1100, 2000, 8192, 0, False, 1),  # 144 tiles
    # 128 tiles: two slices fit one wave of 264; guarded (latency-bound, two
    # CTAs an SM overlap) that halves the walk, aligned (the mma shared) not
    (1000, 2000, 8192, 0, False, 2),
    (1000, 2000, 8192, 0, True, 1),
    # K too short for two slices of SPLIT_MIN_KTILES k-tiles
    (300, 300, 224, 0, True, 1),
])
def test_plan_figures(m, n, k, tile, aligned, want):
    assert _plan(m, n, k, tile, aligned) == want


def _cost(m, n, k, tile, aligned, s, sms):
    """The model in floats, from its description: k-tiles walked (aligned:
    times the CTAs an SM runs at once; guarded: SPLIT_GUARDED_KTILE each),
    plus s + 1 partials of 0.1 k-tile and half their bytes over a k-tile's."""
    bm, bn, bk, _ = TILE_SHAPES[tile if aligned else 0]
    tiles, kt = -(-m // bm) * -(-n // bn), -(-k // bk)
    walk = -(-kt // s) * (-(-tiles * s // sms) if aligned else SPLIT_GUARDED_KTILE)
    part = 0.1 + 0.5 * min(bm, -(-m // 16) * 16) * min(bn, -(-n // 8) * 8) * 4 / ((bm + bn) * bk * 2)
    return walk + ((s + 1) * part if s > 1 else 0.0)


def _shapes(count, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        m = rng.choice([rng.randint(17, 600), rng.randint(17, 4096), rng.randint(1, 16)])
        n = rng.choice([rng.randint(1, 1024), rng.randint(1, 8192)])
        k = rng.choice([rng.randint(1, 512), rng.randint(1, 8192), rng.randint(8192, 65536)])
        tile = rng.randrange(10)
        aligned = rng.random() < 0.5
        sms = rng.choice([SMS, SMS, 16, 78, 144])
        out.append((m, n, k, tile, aligned, sms))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_plan_properties(seed):
    for m, n, k, tile, aligned, sms in _shapes(1500, seed):
        bm, bn, bk, per_sm = TILE_SHAPES[tile if aligned else 0]
        s = split_plan(m, n, k, tile, aligned, sms, per_sm)
        tiles, kt, wave = -(-m // bm) * -(-n // bn), -(-k // bk), sms * per_sm
        where = (m, n, k, tile, aligned, sms, s)
        assert s >= 1, where
        if 2 * tiles > wave:  # the tiles already fill half a wave: no split
            assert s == 1, where
        if s == 1:
            continue
        assert tiles * s <= wave, where  # one wave at most
        # slice z walks k-tiles [z * kt // s, (z + 1) * kt // s): they cover
        # K exactly, none is empty, each has at least SPLIT_MIN_KTILES
        bounds = [z * kt // s for z in range(s + 1)]
        assert bounds[0] == 0 and bounds[-1] == kt, where
        sizes = [b - a for a, b in zip(bounds, bounds[1:])]
        assert min(sizes) >= SPLIT_MIN_KTILES and max(sizes) - min(sizes) <= 1, where
        assert (kt - 1) * bk < k <= kt * bk
        # the workspace: tiles x s partial tiles of fp32, at most a wave's
        assert tiles * s * bm * bn * 4 <= wave * bm * bn * 4 <= 264 * 128 * 256 * 4, where
        # a split is only taken where the model says it is cheaper
        assert _cost(m, n, k, tile, aligned, s, sms) < _cost(m, n, k, tile, aligned, 1, sms), where


@pytest.mark.parametrize("seed", range(2))
def test_plan_is_the_cheapest_count(seed):
    """The count is the cheapest the model allows (the float model against
    the integer rule; ties, where the float rounding could differ, skipped)."""
    for m, n, k, tile, aligned, sms in _shapes(800, 100 + seed):
        bm, bn, bk, per_sm = TILE_SHAPES[tile if aligned else 0]
        tiles, kt = -(-m // bm) * -(-n // bn), -(-k // bk)
        most = min(sms * per_sm // tiles, kt // SPLIT_MIN_KTILES)
        costs = {s: _cost(m, n, k, tile, aligned, s, sms) for s in range(1, max(most, 1) + 1)}
        best = min(costs.values())
        if sum(1 for c in costs.values() if abs(c - best) < 1e-9 * best) > 1:
            continue
        assert split_plan(m, n, k, tile, aligned, sms, per_sm) == min(costs, key=costs.get)


def test_more_sms_never_fewer_slices_for_one_tile():
    """One tile, a long K: the count grows with the SMs until the model's
    tail stops it, and never shrinks as the GPU grows; on one SM a second
    slice would only share it."""
    prev = 0
    for sms in (1, 2, 4, 8, 16, 32, 64, 132, 264):
        s = split_plan(100, 100, 16384, 0, True, sms, 2)
        assert s >= prev
        prev = s
    assert split_plan(100, 100, 16384, 0, True, 1, 2) == 1
    assert split_plan(100, 100, 16384, 0, True, 16, 2) == 16 and prev > 16


def test_split_text_names_the_split():
    assert split_text(4096, 4096, 4096, 4, True, SMS) == ""
    text = split_text(27, 256, 5959, 0, False, SMS)
    assert "38 slices of 4-5 k-tiles" in text and "2 tiles x 38 = 76 CTAs" in text and "264" in text


def test_tuner_times_whole_k_where_the_plan_splits(monkeypatch):
    """The tuner times each tile's whole-K variant (14..23) beside it exactly where
    that tile's plan splits K, so that a split the cost model gets wrong loses to a
    measurement (149 x 5448 x 2048: tile 9 splits in 3); where no tile splits, the
    variants are the tiles alone."""
    from implementations.gemm import cuda as g

    monkeypatch.setattr(g, "_sms", lambda: 132)
    monkeypatch.setattr(g, "_hopper", lambda: True)
    key = g._key("bfloat16", 149, 5448, 2048)
    timed = [v for v in g._TUNER.variants if g._runs(v, key)]
    whole = [v for v in timed if v >= g.WHOLE_K_FIRST]
    assert g.WHOLE_K_FIRST + 9 in whole
    assert whole == [g.WHOLE_K_FIRST + t for t in range(g.WS_FIRST)
                     if split_plan(149, 5448, 2048, t, True, 132, TILE_SHAPES[t][3]) > 1]
    assert [v for v in g._TUNER.variants if g._runs(v, g._key("bfloat16", 8192, 8192, 8192))] == list(range(14))
    assert "K whole" in g.TILES[g.WHOLE_K_FIRST + 9] and g.TILES[g.WHOLE_K_FIRST + 9].startswith(g.TILES[9])

    calls = []

    class Lib:
        def gemm_mma(self, a, b, tile, splits=0):
            calls.append(("mma", tile, splits))

        def gemm_mma_ws(self, a, b, tile):
            calls.append(("ws", tile))

    monkeypatch.setattr(g, "ops", lambda: Lib())
    for tile in (9, g.WS_FIRST + 2, g.WHOLE_K_FIRST + 9):
        g.gemm_tile(None, None, tile)
    assert calls == [("mma", 9, 0), ("ws", 2), ("mma", 9, 1)]
