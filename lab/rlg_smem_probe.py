"""residual_layernorm_gelu over wide rows with h held in shared memory (Gluon): a one-off device comparison.

``python3 -m lab.rlg_smem_probe`` on the H200 (its output is
lab/findings/rlg_smem-79f1595.txt).  At 4096 x 32768 the shipped
Triton kernel gives a row to one program that fills an SM and idles through
its reductions, and the persistent forms that hold chunks in registers ran out
of registers (rlg_pipe_probe).  ``_rlg_smem`` keeps the row's h in shared
memory instead, written in Gluon (Triton's explicit-layout dialect, which can
allocate it): one persistent program an SM walks its rows, and a single pass
over the chunks writes row i's y from shared memory while row i + P's x and
r arrive into the chunk just freed, their loads issued a chunk ahead, so
that reads and writes stream together and only the row's statistics wait.

It lost.  At 4096 x 32768, against the shipped kernel in the same run:
303.8 us at best in bf16 (h kept in 16 bits, 8192-column chunks on 16 warps)
against 252.3, and 584.3 us at best in float32 (2048-column chunks on 16
warps) against 480.3.  A program holds one chunk of x and r in flight
(16-32 KB), against the 64 KB or more an SM needs; 32 warps cap the
registers at 64 and spill, and two programs an SM (8 warps) take 155-242
registers, so the second waits (358-365 us).  The run stopped at its third
shape (1000 x 20000): Gluon wants power-of-two shared-memory shapes, and
three 8192-column chunks are not one.

``_rlg_ring`` (what ``bench`` now times) takes the registers out of the
loads in flight: x and r arrive by cp.async into a ring of chunk slots in
shared memory, up to seven chunks (112 KB) ahead.  It lost by more
(lab/findings/rlg_ring-e5317bf.txt, copy 4193 GB/s): at
4096 x 32768, 0.648 of copy at best in bf16 against the shipped 0.782, and
0.555 in float32 against 0.801; more slots ran slower, not faster (0.514 at
eight 4096-column slots against 0.648 at four 8192-column ones).  The
compiler cannot see that each thread reads back only what it copied or
stored, so it puts a block barrier at every shared-memory hand-over
(31-83 bar.sync in the PTX); that was not profiled further.
"""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy

from implementations._shared.gelu_math import gelu_f32


@gluon.jit
def _chunk_ptrs(base_ptr, row, c: gl.constexpr, N, CHUNK: gl.constexpr, L: gl.constexpr):
    cols = c * CHUNK + gl.arange(0, CHUNK, layout=L)
    return base_ptr + row.to(gl.int64) * N + cols, cols < N


@gluon.jit
def _col_ptrs(base_ptr, c: gl.constexpr, N, CHUNK: gl.constexpr, L: gl.constexpr):
    cols = c * CHUNK + gl.arange(0, CHUNK, layout=L)
    return base_ptr + cols, cols < N


@gluon.jit
def _ingest(h, m, c: gl.constexpr, hs, shift, s1, s2, n0, CHUNK: gl.constexpr, H_TY: gl.constexpr):
    """Chunk c of a row's h into its shared-memory slot and into the row's
    shifted sums (the shift: chunk 0's mean).  Returns shift, s1, s2."""
    if c == 0:
        shift = gl.sum(h, axis=0) / n0
    d = gl.where(m, h - shift, 0.0)
    s1 += d
    s2 += d * d
    hs.slice(c * CHUNK, CHUNK).store(h.to(H_TY))
    return shift, s1, s2


@gluon.jit
def _row_stats(s1, s2, shift, n_f, eps):
    """The row's mean and 1 / std from its shifted sums."""
    mu = gl.sum(s1, axis=0) / n_f
    return shift + mu, gl.rsqrt(gl.maximum(gl.sum(s2, axis=0) / n_f - mu * mu, 0.0) + eps)


@gluon.jit
def _emit(hs, c: gl.constexpr, w, b, mean, rstd, y_ptr, row, N, CHUNK: gl.constexpr, L: gl.constexpr,
          EXACT: gl.constexpr):
    """y of chunk c of `row` from its h in shared memory."""
    py, m = _chunk_ptrs(y_ptr, row, c, N, CHUNK, L)
    h = hs.slice(c * CHUNK, CHUNK).load(L).to(gl.float32)
    y = gelu_f32((h - mean) * rstd * w.to(gl.float32) + b.to(gl.float32), EXACT)
    gl.store(py, y.to(y_ptr.dtype.element_ty), mask=m)


@gluon.jit
def _rlg_smem(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, M, N, eps, CHUNK: gl.constexpr, NCH: gl.constexpr,
              VEC: gl.constexpr, EXACT: gl.constexpr, H16: gl.constexpr):
    """Persistent: program p takes rows p, p + P, ...  Row i's h = x + r sits in
    shared memory (NCH chunks of CHUNK); one pass over the chunks writes row i's
    y from it and, in the same iteration, reads row i + P's x and r into the
    chunk just written, with the next chunk's loads issued a chunk ahead."""
    L: gl.constexpr = gl.BlockedLayout([VEC], [32], [gl.num_warps()], [0])
    S: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0])
    H_TY: gl.constexpr = x_ptr.dtype.element_ty if H16 else gl.float32
    hs = gl.allocate_shared_memory(H_TY, [NCH * CHUNK], S)
    pid = gl.program_id(0)
    P = gl.num_programs(0)
    n_f = N.to(gl.float32)
    n0 = gl.minimum(N, CHUNK).to(gl.float32)

    # row pid into shared memory, its statistics
    row = pid
    s1 = gl.zeros([CHUNK], gl.float32, layout=L)
    s2 = gl.zeros([CHUNK], gl.float32, layout=L)
    shift = 0.0
    for c in gl.static_range(NCH):
        px, m = _chunk_ptrs(x_ptr, row, c, N, CHUNK, L)
        pr, m = _chunk_ptrs(r_ptr, row, c, N, CHUNK, L)
        h = gl.load(px, mask=m, other=0.0).to(gl.float32) + gl.load(pr, mask=m, other=0.0).to(gl.float32)
        shift, s1, s2 = _ingest(h, m, c, hs, shift, s1, s2, n0, CHUNK, H_TY)
    mean, rstd = _row_stats(s1, s2, shift, n_f, eps)

    # chunk 0 of row pid + P and of w, b in flight
    nxt = row + P
    px, m = _chunk_ptrs(x_ptr, nxt, 0, N, CHUNK, L)
    pr, m = _chunk_ptrs(r_ptr, nxt, 0, N, CHUNK, L)
    xa = gl.load(px, mask=m & (nxt < M), other=0.0)
    ra = gl.load(pr, mask=m & (nxt < M), other=0.0)
    pw, m = _col_ptrs(w_ptr, 0, N, CHUNK, L)
    pb, m = _col_ptrs(b_ptr, 0, N, CHUNK, L)
    wa = gl.load(pw, mask=m, other=0.0)
    ba = gl.load(pb, mask=m, other=0.0)
    while row < M:
        nxt = row + P
        s1 = gl.zeros([CHUNK], gl.float32, layout=L)
        s2 = gl.zeros([CHUNK], gl.float32, layout=L)
        shift = 0.0
        for c in gl.static_range(NCH):
            # loads a chunk ahead: chunk c + 1 of row nxt, or chunk 0 of row nxt + P
            if c + 1 < NCH:
                qrow = nxt
            else:
                qrow = nxt + P
            qx, qm = _chunk_ptrs(x_ptr, qrow, (c + 1) % NCH, N, CHUNK, L)
            qr, qm = _chunk_ptrs(r_ptr, qrow, (c + 1) % NCH, N, CHUNK, L)
            xq = gl.load(qx, mask=qm & (qrow < M), other=0.0)
            rq = gl.load(qr, mask=qm & (qrow < M), other=0.0)
            qw, qm = _col_ptrs(w_ptr, (c + 1) % NCH, N, CHUNK, L)
            qb, qm = _col_ptrs(b_ptr, (c + 1) % NCH, N, CHUNK, L)
            wq = gl.load(qw, mask=qm, other=0.0)
            bq = gl.load(qb, mask=qm, other=0.0)
            # row's chunk c out of shared memory, row nxt's chunk c into its place
            _emit(hs, c, wa, ba, mean, rstd, y_ptr, row, N, CHUNK, L, EXACT)
            m = (c * CHUNK + gl.arange(0, CHUNK, layout=L)) < N
            shift, s1, s2 = _ingest(xa.to(gl.float32) + ra.to(gl.float32), m, c, hs, shift, s1, s2, n0, CHUNK, H_TY)
            xa = xq
            ra = rq
            wa = wq
            ba = bq
        mean, rstd = _row_stats(s1, s2, shift, n_f, eps)
        row = nxt


def smem(x, r, w, b, eps, chunk, warps, h16=False, per_sm=1, out=None):
    m, n = x.shape
    y = torch.empty_like(x) if out is None else out
    vec = 16 // x.element_size()
    nch = triton.cdiv(n, chunk)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    k = _rlg_smem[(min(m, sms * per_sm),)](x, r, w, b, y, m, n, float(eps), CHUNK=chunk, NCH=nch, VEC=vec,
                                            EXACT=x.element_size() == 4, H16=h16, num_warps=warps)
    return y, k


@gluon.jit
def _ring_issue(xs, rs, x_ptr, r_ptr, it, G: gl.constexpr, pid, P, M, N, NCH: gl.constexpr,
                CHUNK: gl.constexpr, STAGES: gl.constexpr, L: gl.constexpr):
    """cp.async of chunk it * NCH + G of this program's stream (its rows pid,
    pid + P, ..., NCH chunks each) into ring slot G % STAGES (STAGES divides
    NCH), as one commit group."""
    row = pid + (it + G // NCH) * P
    cols = (G % NCH) * CHUNK + gl.arange(0, CHUNK, layout=L)
    off = row.to(gl.int64) * N + cols
    m = (cols < N) & (row < M)
    async_copy.async_copy_global_to_shared(xs.slice((G % STAGES) * CHUNK, CHUNK), x_ptr + off, mask=m)
    async_copy.async_copy_global_to_shared(rs.slice((G % STAGES) * CHUNK, CHUNK), r_ptr + off, mask=m)
    async_copy.commit_group()


@gluon.jit
def _rlg_ring(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, M, N, eps, CHUNK: gl.constexpr, NCH: gl.constexpr,
              NCH_P2: gl.constexpr, STAGES: gl.constexpr, VEC: gl.constexpr, EXACT: gl.constexpr,
              H16: gl.constexpr):
    """As _rlg_smem, but x and r arrive by cp.async into a ring of STAGES
    chunk slots in shared memory, STAGES - 1 chunks ahead, so that the loads
    in flight cost no registers.  Each thread copies, and later reads, the
    same elements, so it waits only for its own copies (wait_group)."""
    L: gl.constexpr = gl.BlockedLayout([VEC], [32], [gl.num_warps()], [0])
    S: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0])
    H_TY: gl.constexpr = x_ptr.dtype.element_ty if H16 else gl.float32
    D: gl.constexpr = STAGES - 1
    hs = gl.allocate_shared_memory(H_TY, [NCH_P2 * CHUNK], S)
    xs = gl.allocate_shared_memory(x_ptr.dtype.element_ty, [STAGES * CHUNK], S)
    rs = gl.allocate_shared_memory(r_ptr.dtype.element_ty, [STAGES * CHUNK], S)
    pid = gl.program_id(0)
    P = gl.num_programs(0)
    n_f = N.to(gl.float32)
    n0 = gl.minimum(N, CHUNK).to(gl.float32)
    for g in gl.static_range(D):
        _ring_issue(xs, rs, x_ptr, r_ptr, 0, g, pid, P, M, N, NCH, CHUNK, STAGES, L)
    # row pid into shared memory, its statistics
    s1 = gl.zeros([CHUNK], gl.float32, layout=L)
    s2 = gl.zeros([CHUNK], gl.float32, layout=L)
    shift = 0.0
    for c in gl.static_range(NCH):
        _ring_issue(xs, rs, x_ptr, r_ptr, 0, c + D, pid, P, M, N, NCH, CHUNK, STAGES, L)
        async_copy.wait_group(D)
        cols = c * CHUNK + gl.arange(0, CHUNK, layout=L)
        m = cols < N
        h = (xs.slice((c % STAGES) * CHUNK, CHUNK).load(L).to(gl.float32)
             + rs.slice((c % STAGES) * CHUNK, CHUNK).load(L).to(gl.float32))
        shift, s1, s2 = _ingest(h, m, c, hs, shift, s1, s2, n0, CHUNK, H_TY)
    mean, rstd = _row_stats(s1, s2, shift, n_f, eps)
    row = pid
    it = 1  # rows ingested so far
    while row < M:
        s1 = gl.zeros([CHUNK], gl.float32, layout=L)
        s2 = gl.zeros([CHUNK], gl.float32, layout=L)
        shift = 0.0
        for c in gl.static_range(NCH):
            # this step ingests chunk it * NCH + c of the stream (chunk c of the next row)
            _ring_issue(xs, rs, x_ptr, r_ptr, it, c + D, pid, P, M, N, NCH, CHUNK, STAGES, L)
            cols = c * CHUNK + gl.arange(0, CHUNK, layout=L)
            m = cols < N
            wv = gl.load(w_ptr + cols, mask=m, other=0.0).to(gl.float32)
            bv = gl.load(b_ptr + cols, mask=m, other=0.0).to(gl.float32)
            h = hs.slice(c * CHUNK, CHUNK).load(L).to(gl.float32)
            y = gelu_f32((h - mean) * rstd * wv + bv, EXACT)
            gl.store(y_ptr + row.to(gl.int64) * N + cols, y.to(y_ptr.dtype.element_ty), mask=m)
            async_copy.wait_group(D)
            hn = (xs.slice((c % STAGES) * CHUNK, CHUNK).load(L).to(gl.float32)
                  + rs.slice((c % STAGES) * CHUNK, CHUNK).load(L).to(gl.float32))
            shift, s1, s2 = _ingest(hn, m, c, hs, shift, s1, s2, n0, CHUNK, H_TY)
        mean, rstd = _row_stats(s1, s2, shift, n_f, eps)
        row += P
        it += 1
    async_copy.wait_group(0)


def ring(x, r, w, b, eps, chunk, warps, stages, h16=False, out=None):
    m, n = x.shape
    y = torch.empty_like(x) if out is None else out
    nch = triton.cdiv(n, chunk)
    if nch % stages:
        raise ValueError(f"{stages} ring slots do not divide {nch} chunks")
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    k = _rlg_ring[(min(m, sms),)](x, r, w, b, y, m, n, float(eps), CHUNK=chunk, NCH=nch,
                                   NCH_P2=triton.next_power_of_2(nch), STAGES=stages, VEC=16 // x.element_size(),
                                   EXACT=x.element_size() == 4, H16=h16, num_warps=warps)
    return y, k


def sm90_resources(dtype: str, chunk: int, warps: int, h16: bool, n: int = 32768, stages: int = 0):
    """(registers, spill bytes, shared bytes, 16-byte global accesses?) of
    _rlg_smem, or of _rlg_ring with ``stages`` ring slots, compiled for
    sm_90a here, without a GPU (ptxas from the triton wheel)."""
    import os
    import re
    import subprocess
    import tempfile
    from pathlib import Path

    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    if not ptxas.exists():
        raise SystemExit(f"no ptxas at {ptxas}")
    ty = {"float32": "*fp32", "bfloat16": "*bf16", "float16": "*fp16"}[dtype]
    sig = {k: ty for k in ("x_ptr", "r_ptr", "w_ptr", "b_ptr", "y_ptr")}
    sig.update(M="i32", N="i32", eps="fp32")
    nch = triton.cdiv(n, chunk)
    const = {"CHUNK": chunk, "NCH": nch, "VEC": 4 if dtype == "float32" else 8, "EXACT": dtype == "float32",
             "H16": h16}
    if stages:
        const.update(NCH_P2=triton.next_power_of_2(nch), STAGES=stages)
    sig.update({k: "constexpr" for k in const})
    attrs = {(i,): [["tt.divisibility", 16]] for i in (0, 1, 2, 3, 4, 6)}  # pointers and N
    k = triton.compile(GluonASTSource(fn=_rlg_ring if stages else _rlg_smem, signature=sig, constexprs=const,
                                      attrs=attrs),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(k.asm["ptx"])
    try:
        log = subprocess.run([str(ptxas), "-arch=sm_90a", "-v", f.name, "-o", os.devnull],
                             capture_output=True, text=True, check=True).stderr
    finally:
        os.unlink(f.name)
    return (int(re.search(r"Used (\d+) registers", log).group(1)),
            int(re.search(r"(\d+) bytes spill stores", log).group(1)), k.metadata.shared,
            bool(re.search(r"cp\.async\.cg\.shared\.global \[[^]]*\], \[[^]]*\], 0x10" if stages
                           else r"ld\.global[.\w:]*\.v4", k.asm["ptx"])))


def bench():
    if not torch.cuda.is_available():
        raise SystemExit("rlg_smem_probe needs a CUDA GPU (it times kernels)")
    from lab._probe import print_table, rlg_shipped, variant_row

    rows = []
    plans = {"bfloat16": [(4096, 16, 8, True), (8192, 16, 4, True), (4096, 16, 4, False), (4096, 16, 4, True),
                          (2048, 16, 8, True)],
             "float32": [(2048, 16, 4, False), (4096, 16, 2, False)]}
    for dtype, m, n in [("bfloat16", 300, 30000), ("bfloat16", 4096, 32768), ("float32", 4096, 32768),
                        ("float32", 300, 30000)]:
        (x, r, w, b, eps), gb, rel, shipped = rlg_shipped(dtype, m, n, 50)
        rows.append(shipped)
        for chunk, warps, stages, h16 in plans[dtype]:
            if triton.cdiv(n, chunk) % stages:
                continue
            rows.append(variant_row(
                dtype, f"{m}x{n}", f"ring chunk {chunk}, {warps} warps, {stages} slots, h {'16-bit' if h16 else 'fp32'}",
                x, gb, rel, lambda out=None: ring(x, r, w, b, eps, chunk, warps, stages, h16, out=out),
                lambda k: f"{k.n_regs} regs {k.n_spills} spills {k.metadata.shared // 1024} KiB"))
    print_table(rows, "rel err")


if __name__ == "__main__":
    bench()
