"""GEMM operands padded to 16-byte rows (implementations.gemm.padding), and the
CUDA GEMMs' routes through them, on the CPU with the CUDA ops faked by torch."""
import pytest
import torch

from implementations.gemm import padding
from suite.workload import Case, discover


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
@pytest.mark.parametrize("m,n,k", [(5, 7, 9), (33, 64, 17), (16, 13, 32), (40, 24, 16)])
def test_padded_operands_give_the_same_product(m, n, k, dtype):
    g = torch.Generator().manual_seed(m * 1000 + n * 10 + k)
    a = torch.randn(m, k, generator=g).to(dtype)
    b = torch.randn(k, n, generator=g).to(dtype)
    padded = padding.pad_operands(a, b)
    e = 16 // a.element_size()
    if k % e == 0 and n % e == 0:
        assert padded is None
        return
    a2, b2 = padded
    assert padding.rows_aligned(a2) and padding.rows_aligned(b2)
    assert a2.shape[1] == b2.shape[0] and a2.shape[1] % e == 0 and b2.shape[1] % e == 0
    # the added columns of A and rows of B are zeros: the product's first n columns are A @ B
    assert torch.count_nonzero(a2[:, k:]) == 0 and torch.count_nonzero(b2[k:]) == 0
    c = padding.unpad(a2.double() @ b2.double(), n)
    assert c.shape == (m, n) and c.is_contiguous()
    torch.testing.assert_close(c, a.double() @ b.double(), rtol=1e-12, atol=1e-12)
    assert padding.padded_text(k, n, a.element_size()).startswith(" (rows padded to 16 bytes: K ")


def test_alignment_counts_strides_and_base():
    buf = torch.randn(8 * 65)
    assert padding.rows_aligned(buf[:512].view(8, 64))
    assert not padding.rows_aligned(buf[1:513].view(8, 64))     # base 4 bytes off
    assert not padding.rows_aligned(torch.randn(64, 8).t())     # columns contiguous, not rows
    assert not padding.rows_aligned(torch.randn(8, 66)[:, :64])  # row stride 66 floats
    a, b = buf[1:513].view(8, 64), torch.randn(64, 8)
    a2, b2 = padding.pad_operands(a, b)                         # a fresh, aligned copy of A
    assert padding.rows_aligned(a2) and b2 is b and torch.equal(a2, a)
    assert padding.padded_text(64, 8, 4) == ""


def test_padding_pays_only_on_large_problems():
    assert padding.pays(2000, 3001, 2001)
    assert not padding.pays(300, 1001, 999)   # 1/300 alone is near the bound
    assert not padding.pays(8192, 8192, 100)  # a short K: the copies cost as much as the math


@pytest.fixture
def fake_cuda_gemm(monkeypatch):
    """implementations.gemm.cuda with its ops computed by torch, each call recorded
    as (op, M, K, N), and every tuned call running tile 2."""
    from implementations.gemm import cuda as cg

    calls = []

    def op(name):
        def run(a, b, *args):
            assert a.shape[1] == b.shape[0]
            calls.append((name, a.shape[0], a.shape[1], b.shape[1]))
            return (a.double() @ b.double()).to(a.dtype)
        return run

    lib = type("Lib", (), {n: staticmethod(op(n))
                           for n in ("gemm_mma", "gemm_mma_ws", "gemm_skinny", "gemm_skinny_tma")})
    monkeypatch.setattr(cg, "ops", lambda: lib)
    monkeypatch.setattr(cg._TUNER, "run", lambda key, call, at=None: call(2))
    return calls


def _inputs(m, n, k):
    g = torch.Generator().manual_seed(m + n + k)
    return torch.randn(m, k, generator=g).bfloat16(), torch.randn(k, n, generator=g).bfloat16()


def test_cuda_gemm_routes(fake_cuda_gemm, monkeypatch):
    from implementations.gemm import cuda as cg

    calls = fake_cuda_gemm
    cg.gemm_cuda(*_inputs(8, 33, 17))
    assert calls[-1] == ("gemm_skinny", 8, 17, 33)           # at most 16 rows: skinny, any alignment
    cg.gemm_cuda(*_inputs(40, 64, 24))
    assert calls[-1] == ("gemm_mma", 40, 24, 64)             # aligned: the tuned tiles
    cg.gemm_cuda(*_inputs(40, 33, 17))
    assert calls[-1] == ("gemm_mma", 40, 17, 33)             # unaligned and small: the guarded tile
    monkeypatch.setattr(padding, "PAD_BELOW", 1.0)
    a, b = _inputs(40, 33, 17)
    c = cg.gemm_cuda(a, b)
    assert calls[-1] == ("gemm_mma", 40, 24, 40)             # padded to 16-byte rows, then tuned
    assert c.shape == (40, 33) and c.is_contiguous()
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-2, atol=1e-2)


def test_cuda_gemm_config_names_the_padding(fake_cuda_gemm, monkeypatch):
    from implementations.gemm import cuda as cg

    monkeypatch.setattr(cg, "_sms", lambda: 132)
    assert "guarded 2-byte loads" in cg._config(Case.make("gemm", "bfloat16", M=300, N=1001, K=999))
    text = cg._config(Case.make("gemm", "bfloat16", M=2000, N=3001, K=2001))
    assert "guarded" not in text and text.endswith("(rows padded to 16 bytes: K 2001->2008, N 3001->3008)")


def test_wgmma_takes_every_16_bit_shape_through_padding(monkeypatch):
    from implementations.gemm import cuda_wgmma as w

    impl = discover().get("gemm", "cuda:wgmma")
    assert impl.supports(Case.make("gemm", "bfloat16", M=3001, N=2047, K=1531)) is None
    assert "16-bit" in impl.supports(Case.make("gemm", "float32", M=64, N=64, K=64))
    calls = []

    def run(a, b, tile):
        calls.append((a.shape[0], a.shape[1], b.shape[1]))
        return (a.double() @ b.double()).to(a.dtype)

    monkeypatch.setattr(w, "ops", lambda: type("Lib", (), {"gemm_wgmma": staticmethod(run)}))
    monkeypatch.setattr(w._TUNER, "run", lambda key, call, at=None: call(3))
    a, b = _inputs(20, 30, 10)
    c = w.gemm_cuda_wgmma(a, b)
    assert calls == [(20, 16, 32)] and c.shape == (20, 30)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-2, atol=1e-2)


def test_onto_lines_copies_only_rows_off_lines():
    a, _ = _inputs(5, 8, 72)                       # 144-byte rows
    lined = padding.onto_lines(a)
    assert lined.shape == a.shape and lined.stride() == (128, 1) and torch.equal(lined, a)
    assert padding.on_lines(lined) and not padding.on_lines(a)
    b, _ = _inputs(3, 8, 128)
    assert padding.onto_lines(b) is b
    odd = torch.randn(4, 9).bfloat16()              # 18-byte rows: not whole words
    assert torch.equal(padding.onto_lines(odd), odd) and padding.onto_lines(odd).stride() == (64, 1)
    shifted = torch.randn(4 * 72 + 1).bfloat16()[1:].view(4, 72)   # base off an 8-byte word
    assert torch.equal(padding.onto_lines(shifted), shifted)
    assert padding.on_lines(a[:1])                  # one row: nothing to straddle
    assert padding.stride_on_lines(1, 9, 2) and padding.stride_on_lines(5, 64, 2)
    assert not padding.stride_on_lines(5, 72, 2)


def test_wgmma_tunes_lined_copies_where_rows_are_off_lines(monkeypatch):
    from implementations.gemm import cuda_wgmma as w

    monkeypatch.setattr(w, "_sms", lambda: 132)
    seen = []

    def run(a, b, tile):
        seen.append((tile, a.stride(0), b.stride(0)))
        return (a.double() @ b.double()).to(a.dtype)

    monkeypatch.setattr(w, "ops", lambda: type("Lib", (), {"gemm_wgmma": staticmethod(run)}))
    monkeypatch.setattr(w._TUNER, "run", lambda key, call, at=None: (key, call(w.LINED + 3), call(3))[0])  # both forms
    a, b = _inputs(16, 40, 24)                     # rows of 48 and 80 bytes
    key = w._run(a, b)                              # the patched runner returns the key
    assert key[-1] is True and seen == [(3, 64, 64), (3, 24, 40)]
    # lined variants run only where a stride is off lines and the copy pays
    assert w._runs(w.LINED + 3, w._key("bfloat16", 4096, 4104, 4104, True))
    assert not w._runs(w.LINED + 3, w._key("bfloat16", 4096, 4104, 4104, False))
    assert not w._runs(w.LINED + 3, w._key("bfloat16", 16, 40, 24, True))
    assert w._runs(3, w._key("bfloat16", 16, 40, 24, True))


def test_wgmma_key_tells_rows_apart_below_one_tile():
    """One row of tiles, but M = 1 and M = 128 tune apart (their best tiles differ);
    sizes inside a half-octave below one tile, and all sizes past it, tune together."""
    from implementations.gemm import cuda_wgmma as w

    def key(m):
        return w._key("bfloat16", m, 8192, 8192, False)

    assert key(1) != key(128) and key(1) != key(16) and key(16) != key(64)
    assert key(100) == key(128) and key(13) == key(16)
    assert key(129) == key(256) and key(200) != key(300)
    assert [key(m)[1] for m in (1, 128, 129, 300)] == [1, 1, 2, 3]  # tiles of 128 rows as before



def test_cuda_gemm_races_the_skinny_forms_on_hopper(fake_cuda_gemm, monkeypatch):
    """At most 16 rows on Hopper: 16-byte rows go to the skinny race (keyed by
    M, N, K to a half-octave), other rows to gemm_skinny alone."""
    from implementations.gemm import cuda as cg

    calls = fake_cuda_gemm
    keys = []

    def race(key, call, at=None):
        keys.append(key)
        return call(1)

    monkeypatch.setattr(cg, "_hopper", lambda: True)
    monkeypatch.setattr(cg._SKINNY_TUNER, "run", race)
    cg.gemm_cuda(*_inputs(5, 1536, 808))
    assert calls[-1] == ("gemm_skinny_tma", 5, 808, 1536)
    cg.gemm_cuda(*_inputs(6, 1600, 1000))
    assert keys == [("skinny", "bfloat16", 6, 1536, 1024), ("skinny", "bfloat16", 6, 2048, 1024)]
    cg.gemm_cuda(*_inputs(5, 1538, 808))                     # N off 8: no TMA
    assert calls[-1] == ("gemm_skinny", 5, 808, 1538)
    a, b = _inputs(5, 1536, 808)
    cg.gemm_cuda(a.float(), b.float())                       # float32: the FMA form, no race
    assert calls[-1] == ("gemm_skinny", 5, 808, 1536) and len(keys) == 2
    monkeypatch.setattr(cg, "_hopper", lambda: False)
    cg.gemm_cuda(*_inputs(5, 1536, 808))
    assert calls[-1] == ("gemm_skinny", 5, 808, 1536)


def test_cuda_gemm_takes_float32_at_skinny_shapes_only():
    impl = discover().get("gemm", "cuda")
    assert impl.supports(Case.make("gemm", "float32", M=16, N=4096, K=4096)) is None
    assert "cuda:tf32x3" in impl.supports(Case.make("gemm", "float32", M=17, N=64, K=64))
    assert impl.supports(Case.make("gemm", "bfloat16", M=17, N=64, K=64)) is None


def test_the_tiled_triton_gemms_refuse_operands_past_32_bit_offsets():
    """A prefill LM head of 32768 tokens x 128256 words has a C of 4.2e9 elements:
    unsupported with the reason, not an error inside the call."""
    from suite.workload import Case, discover

    reg = discover()
    big = Case.make("gemm", "bfloat16", M=32768, N=128256, K=4096)
    fits = Case.make("gemm", "bfloat16", M=4096, N=128256, K=4096)
    assert "32-bit" in reg.get("gemm", "triton").supports(big)
    assert reg.get("gemm", "triton").supports(fits) is None
    f32 = Case.make("gemm", "float32", M=32768, N=128256, K=4096)
    for name in ("triton:tf32", "triton:tf32x3"):
        assert "32-bit" in reg.get("gemm", name).supports(f32)
