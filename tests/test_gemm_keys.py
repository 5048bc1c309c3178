"""The CUDA GEMMs' tuning keys follow their tiles: shapes whose tile counts and
k-steps agree share a key (a sweep of them tunes once), and a variant runs
for a key exactly where it runs for each of its shapes."""
from __future__ import annotations


def test_wgmma_keys_follow_the_tiles(monkeypatch):
    """Shapes that differ inside one tile share a key, and the stream-K tiles
    run for the whole key as for each of its shapes."""
    from implementations.gemm import cuda_wgmma as w

    monkeypatch.setattr(w, "_sms", lambda: 132)

    assert w._key("bfloat16", 1000, 5250, 2370, True) == w._key("bfloat16", 1024, 5312, 2432, True)
    assert w._key("bfloat16", 1025, 5312, 2432, True) != w._key("bfloat16", 1024, 5312, 2432, True)
    assert w._key("bfloat16", 1024, 5313, 2432, True) != w._key("bfloat16", 1024, 5312, 2432, True)
    for m, n, k in ((1000, 5250, 2370), (1699, 2328, 1152), (129, 8, 8), (4095, 4104, 1024)):
        for t, bn in ((6, 256), (7, 128), (8, 64), (10, 192)):
            tiles = -(-m // 128) * -(-n // bn)
            direct = w.sk_plan(tiles, -(-k // 64), 132)[0] > 0
            assert w._runs(t, w._key("bfloat16", m, n, k, False)) == direct, (m, n, k, t)


def test_mma_keys_follow_the_tiles(monkeypatch):
    from implementations.gemm import cuda as cg

    monkeypatch.setattr(cg, "_sms", lambda: 132)
    assert cg._key("bfloat16", 1000, 5250, 2370) == cg._key("bfloat16", 1024, 5376, 2400)
    assert cg._key("bfloat16", 1025, 5376, 2400) != cg._key("bfloat16", 1024, 5376, 2400)
    assert cg._key("bfloat16", 1024, 5376, 2401) != cg._key("bfloat16", 1024, 5376, 2400)
    for m, n, k in ((1000, 5250, 2370), (4096, 4096, 4096), (300, 256, 5768), (2000, 3008, 2008)):
        for t in range(cg.WS_FIRST):
            bm, bn, bk, per_sm = cg.TILE_SHAPES[t]
            top = cg.split_plan(-(-m // 128) * 128, -(-n // 128) * 128, -(-k // 32) * 32, t, True, 132, per_sm)
            assert cg.split_plan(m, n, k, t, True, 132, per_sm) == top or m < bm, (m, n, k, t)
            assert cg._runs(cg.WHOLE_K_FIRST + t, cg._key("bfloat16", m, n, k)) == (top > 1)


def test_wgmma_config_asks_for_the_key_the_call_tuned(monkeypatch):
    """config looks the tuned variant up under the key the call used, one-row
    A and one-row B included (a single row is on lines whatever its width)."""
    import torch

    from implementations.gemm import cuda_wgmma as w
    from suite.workload import Case

    monkeypatch.setattr(w, "_sms", lambda: 132)
    monkeypatch.setattr(w, "ops", lambda: type("Lib", (), {"gemm_wgmma": staticmethod(
        lambda a, b, tile: (a.double() @ b.double()).to(a.dtype))}))
    ran, asked = [], []
    monkeypatch.setattr(w._TUNER, "run", lambda key, call, at=None: (ran.append(key), call(3))[1])
    monkeypatch.setattr(w._TUNER, "config", lambda key, at=None: asked.append(key))
    for m, n, k in ((1, 128, 24), (1, 40, 24), (16, 40, 24), (16, 128, 64), (24, 40, 8), (300, 392, 136)):
        w.gemm_cuda_wgmma(torch.randn(m, k).bfloat16(), torch.randn(k, n).bfloat16())
        w._config(Case.make("gemm", "bfloat16", M=m, N=n, K=k))
        assert asked[-1] == ran[-1], (m, n, k)


def test_tf32x3_rows_fill_the_wave(monkeypatch):
    """gemm_tf32x3_wgmma takes 64-row tiles only where 128-row ones leave SMs
    idle in a single wave; the config text names the height that runs."""
    from implementations.gemm import cuda as cg
    from suite.workload import Case

    monkeypatch.setattr(cg, "_sms", lambda: 132)
    assert cg.tf32x3_rows(1607, 1087) == 64        # 13 x 9 = 117 tiles of 128 rows
    assert cg.tf32x3_rows(1699, 2328) == 128       # 14 x 19 = 266
    assert cg.tf32x3_rows(1536, 1408) == 128       # 12 x 11 = 132: one full wave
    assert cg.tf32x3_rows(1, 4096) == 64
    monkeypatch.setattr(cg, "_hopper", lambda: True)
    text = cg._tf32x3_config(Case.make("gemm", "float32", M=1607, N=1087, K=1637))
    assert text.startswith("64x128x32") and "1 warpgroup," in text and "4-byte chunks" in text
    text = cg._tf32x3_config(Case.make("gemm", "float32", M=1699, N=2328, K=1152))
    assert text.startswith("128x128x32") and "2 warpgroups" in text and "16-byte chunks" in text
    monkeypatch.setattr(cg, "_hopper", lambda: False)
    assert "mma.sync" in cg._tf32x3_config(Case.make("gemm", "float32", M=1699, N=2328, K=1152))
