"""Compile the gemm and attention Triton (and Gluon) kernels for sm_90 without a GPU.

Run without TRITON_INTERPRET (the kernels must be real JITFunctions):
    python tests/sm90_compute_probe.py
Prints one JSON list: per (kernel, config) the shared memory, registers and
spill bytes (from Triton's bundled ptxas) and which instructions the PTX uses,
so that a CPU test can hold the GPU configs to what the interpreter cannot
check: shared memory limits, register spills, wgmma and TMA being used.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _compile(fn, sig, const, divisible, warps, stages):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig = dict(sig, **{k: "constexpr" for k in const})
    sig = {name: sig[name] for name in fn.arg_names}
    attrs = {(fn.arg_names.index(n),): [["tt.divisibility", 16]] for n in divisible}
    k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=const, attrs=attrs),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages})
    return _ptxas_report(k)


def _ptxas_report(k) -> dict:
    """What ptxas (sm_90a) and the PTX say of compiled kernel ``k``."""
    import triton

    ptx = k.asm["ptx"]
    ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(ptx)
    try:
        log = subprocess.run([ptxas, "-arch=sm_90a", "-v", f.name, "-o", os.devnull],
                             capture_output=True, text=True, check=True).stderr
    finally:
        os.unlink(f.name)
    return {"shared": k.metadata.shared,
            "regs": int(re.search(r"Used (\d+) registers", log).group(1)),
            "spill": int(re.search(r"(\d+) bytes spill stores", log).group(1)),
            "wgmma": "wgmma.mma_async" in ptx, "tma": "cp.async.bulk.tensor" in ptx,
            # 16-byte asynchronous copies of A and B, and element-by-element loads
            "cp_async16": len(re.findall(r"cp\.async\.cg\.shared\.global \[[^]]*\], \[[^]]*\], 0x10", ptx)),
            "scalar_loads": len(re.findall(r"ld\.global\.b(?:16|32) ", ptx)),
            # asynchronous MMA groups committed, and how many each wait leaves in flight
            "wgmma_commits": ptx.count("wgmma.commit_group"),
            "wgmma_waits": [int(w) for w in re.findall(r"wgmma\.wait_group\.sync\.aligned (\d+)", ptx)]}


def _gemm_jobs():
    from implementations.gemm import _triton_persistent as P
    from implementations.gemm import _triton_tiled as T

    class _Operand:  # what prune() reads of the A operand
        def __init__(self, size):
            self.size = size

        def element_size(self):
            return self.size

    ints = ["M", "N", "K", "stride_am", "stride_bk", "stride_cm", "SMS", "M_KEY", "N_KEY", "K_KEY", "WHOLE_K",
            "DP_TILES", "SPLIT_K"]
    sizes = ["M", "N", "K", "stride_am", "stride_bk", "stride_cm"]

    def tiled(m_key, n_key, shape, size, prec):
        """T.prune's candidates for a problem of ``shape`` (M, N, K) less the K-whole twins
        (WHOLE_K is a plain argument: the twin is the same kernel), and their constants."""
        m, n, k = shape
        named = {"M_KEY": m_key, "N_KEY": n_key, "M": m, "N": n, "K": k, "SMS": 132, "a_ptr": _Operand(size)}
        for cfg in T.prune(None, named, PRECISION=prec):
            if not cfg.kwargs["WHOLE_K"]:
                yield cfg, {k: v for k, v in cfg.kwargs.items() if k != "WHOLE_K"}

    def signature(ptr):
        return dict({p: ptr for p in ("a_ptr", "b_ptr", "c_ptr")}, ws_ptr="*fp32", lock_ptr="*i32",
                    **{n: "i32" for n in ints})

    for label, ptr, size, prec, m in (("bf16", "*bf16", 2, "tf32", 4096), ("bf16", "*bf16", 2, "tf32", 64),
                                      ("bf16", "*bf16", 2, "tf32", 8), ("fp32-ieee", "*fp32", 4, "ieee", 4096),
                                      ("fp32-ieee", "*fp32", 4, "ieee", 8), ("fp32-tf32x3", "*fp32", 4, "tf32x3", 4096),
                                      ("fp32-tf32x3", "*fp32", 4, "tf32x3", 64), ("fp32-tf32x3", "*fp32", 4, "tf32x3", 8)):
        for cfg, kw in tiled(m, m, (m, m, m), size, prec):
            const = dict(kw, PRECISION=prec, UPCAST=False, VEC_K=16, VEC_N=16, EVEN_M=True, EVEN_N=True,
                         EVEN_K=True, stride_ak=1, stride_bn=1, stride_cn=1)
            yield (f"gemm-tiled-{label}", cfg, T._gemm_kernel.fn, signature(ptr), const,
                   ["a_ptr", "b_ptr", "c_ptr", "ws_ptr"] + sizes)
    # M=4000, N=3000, K=5000: sizes Triton sees as unaligned (not multiples of 16);
    # the launcher's VEC_K = VEC_N = 8 must keep A's and B's loads 16 bytes wide
    for cfg, kw in tiled(4096, 3072, (4000, 3000, 5000), 2, "tf32"):
        const = dict(kw, PRECISION="tf32", UPCAST=False, VEC_K=8, VEC_N=8, EVEN_M=False, EVEN_N=False,
                     EVEN_K=False, stride_ak=1, stride_bn=1, stride_cn=1)
        yield "gemm-tiled-bf16-ragged", cfg, T._gemm_kernel.fn, signature("*bf16"), const, ["a_ptr", "b_ptr", "c_ptr"]
    # decode with an odd K (M=3, N=1288, K=3449): A's rows are unaligned, B's and
    # C's are not (VEC_N = 8), so B's loads, all of the traffic, stay 16 bytes wide
    for cfg, kw in tiled(3, 1536, (3, 1288, 3449), 2, "tf32"):
        const = dict(kw, PRECISION="tf32", UPCAST=False, VEC_K=1, VEC_N=8, EVEN_M=False, EVEN_N=False,
                     EVEN_K=False, stride_ak=1, stride_bn=1, stride_cn=1)
        yield "gemm-tiled-bf16-decode", cfg, T._gemm_kernel.fn, signature("*bf16"), const, ["a_ptr", "b_ptr", "c_ptr"]
    for cfg in P.LARGE + P.SKINNY:
        bm, bn, bk = (cfg.kwargs[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
        sig = {"a_desc": f"tensordesc<bf16[{bm}, {bk}]>", "b_desc": f"tensordesc<bf16[{bk}, {bn}]>",
               "c_desc": f"tensordesc<bf16[{bm}, {bn}]>", "ws_ptr": "*fp32", "lock_ptr": "*i32",
               "M": "i32", "N": "i32", "K": "i32", "M_KEY": "i32", "N_KEY": "i32", "K_KEY": "i32", "LINED_KEY": "i32",
               "DP_TILES": "i32", "SPLIT_K": "i32"}
        const = dict(cfg.kwargs, NUM_SMS=132, UPCAST=False, DTYPE="torch.bfloat16")
        yield "gemm-persistent-bf16", cfg, P._persistent_kernel.fn, sig, const, ["ws_ptr"]


def _attention_jobs():
    from implementations.attention import _triton_flash as A
    from implementations.attention.head_dims import padded_head_dim

    # each head dim's tiles, and D = 96 (Phi-3's) on D = 128's, its columns past 96 masked
    for dim in (64, 128, 96):
        for cfg in A.CONFIGS[padded_head_dim(dim)]:
            sig = {"Q": "*bf16", "K": "*bf16", "V": "*bf16", "O": "*bf16", "S": "i32", "qk_scale": "fp32",
                   "S_KEY": "i32"}
            const = dict(cfg.kwargs, HEAD_DIM=padded_head_dim(dim), DIM=dim, CAUSAL=True, UPCAST=False)
            yield f"attention-d{dim}-causal", cfg, A._attn_fwd, sig, const, ["Q", "K", "V", "O"]
    yield from tf32x3_attention_jobs(causal=True)
    yield from tf32x3_attention_jobs(causal=True, dims=(96,))
    yield from tf32x3_attention_jobs(causal=True, in_kernel=True)


def tf32x3_attention_jobs(causal: bool, configs=None, dims=(64, 128), in_kernel: bool = False):
    """The float32 (tf32x3) attention kernel per config (``configs``: padded head dim
    -> configs, default its own) at each of ``dims``: its tensor descriptors' types.
    ``in_kernel``: the form that splits K and V (and Q where D <= 64) as it loads them."""
    from implementations.attention import _triton_tf32x3 as F
    from implementations.attention.head_dims import padded_head_dim

    for dim in dims:
        d = padded_head_dim(dim)
        for cfg in (configs or (F.IN_KERNEL_CONFIGS if in_kernel else F.CONFIGS))[d]:
            bm, bn = cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"]
            v_box = f"[{bn}, {d}]" if in_kernel else f"[{d}, {bn}]"
            sig = {"q_desc": f"tensordesc<fp32[{bm}, {d}]>", "k_desc": f"tensordesc<fp32[{bn}, {d}]>",
                   "v_desc": f"tensordesc<fp32{v_box}>", "O": "*fp32", "S": "i32", "BH": "i32",
                   "qk_scale": "fp32", "S_KEY": "i32"}
            const = dict(cfg.kwargs, HEAD_DIM=d, DIM=dim, CAUSAL=causal, RAW_Q=in_kernel and d == 64,
                         RAW_KV=in_kernel)
            name = "attention-tf32x3" + ("-inkernel" if in_kernel else "") + f"-d{dim}" + ("-causal" if causal else "")
            yield name, cfg, F._attn_fwd, sig, const, ["O"]


def _compile_gluon(fn, sig, const, warps):
    """As _compile, for a Gluon kernel (its signature may name tensor descriptors)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    sig = dict(sig, **{k: "constexpr" for k in const})
    sig = {name: sig[name] for name in fn.arg_names}
    src = GluonASTSource(fn=fn, signature=sig, constexprs=const,
                         attrs={(fn.arg_names.index("O"),): [["tt.divisibility", 16]]})
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
    return _ptxas_report(k)


def _gluon_attention_jobs():
    import torch
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    from triton.runtime.jit import mangle_type

    from implementations.attention import _gluon_flash as G

    def desc(rows, d):
        t = torch.empty(4 * rows, d, dtype=torch.bfloat16)
        layout = gl.NVMMASharedLayout.get_default_for([rows, d], gl.bfloat16)
        return mangle_type(TensorDescriptor.from_tensor(t, [rows, d], layout))

    for d, configs in G.CONFIGS.items():
        for bm, bn, stages, warps, q_regs, ws in configs:
            for causal in (False, True):
                const = dict(HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, STAGES=stages, CAUSAL=causal,
                             Q_IN_REGS=bool(q_regs), num_warps=warps)
                if ws:
                    const["CONSUMER_REGS"] = G.CONSUMER_REGS[bm // 64]
                sig = {"q_desc": desc(64, d), "k_desc": desc(bn, d), "v_desc": desc(bn, d), "O": "*bf16",
                       "S": "i32", "qk_scale": "fp32"}
                name = f"attention-gluon-d{d}" + ("-causal" if causal else "")
                kernel = G._attn_fwd_sm90_ws if ws else G._attn_fwd_sm90
                yield name, dict(BLOCK_M=bm, BLOCK_N=bn, STAGES=stages, Q_IN_REGS=q_regs, WS=ws), warps, \
                    _compile_gluon(kernel, sig, const, warps)


def main() -> int:
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("run without TRITON_INTERPRET", file=sys.stderr)
        return 2
    out = []
    for name, cfg, fn, sig, const, divisible in list(_gemm_jobs()) + list(_attention_jobs()):
        res = _compile(fn, sig, const, divisible, cfg.num_warps, cfg.num_stages)
        out.append(dict(res, kernel=name, config=dict(cfg.kwargs), warps=cfg.num_warps, stages=cfg.num_stages))
    for name, config, warps, res in _gluon_attention_jobs():
        out.append(dict(res, kernel=name, config=config, warps=warps, stages=config["STAGES"]))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
