"""A non-causal attention forward whose loop issues the next key block's QK^T
before this block's softmax and PV product: lab/attention_occupancy.py compiles
it to see whether triton 3.6 then keeps that MMA in flight across the softmax
(a wgmma.wait_group that leaves one group pending).  S a multiple of BLOCK_N,
no masks: it is compiled, never run."""
import triton
import triton.language as tl


@triton.jit
def _fold(qk, acc, l_i, m_i, v, qk_scale):
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    p = tl.math.exp2(qk * qk_scale - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, l_i, m_new


@triton.jit
def attn_next_qk_first(Q, K, V, O, S, qk_scale, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       HEAD_DIM: tl.constexpr):
    head = tl.program_id(1).to(tl.int64) * S * HEAD_DIM
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    kv = tl.arange(0, BLOCK_N)[:, None] * HEAD_DIM + offs_d[None, :]
    q = tl.load(Q + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :])
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk = tl.dot(q, tl.trans(tl.load(K + head + kv)))
    for start_n in range(BLOCK_N, S, BLOCK_N):
        qk_next = tl.dot(q, tl.trans(tl.load(K + head + start_n * HEAD_DIM + kv)))
        v = tl.load(V + head + (start_n - BLOCK_N) * HEAD_DIM + kv)
        acc, l_i, m_i = _fold(qk, acc, l_i, m_i, v, qk_scale)
        qk = qk_next
    acc, l_i, m_i = _fold(qk, acc, l_i, m_i, tl.load(V + head + (S - BLOCK_N) * HEAD_DIM + kv), qk_scale)
    tl.store(O + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :], (acc / l_i[:, None]).to(O.dtype.element_ty))
