"""Python mirrors of the CUDA row kernels' launch plans (softmax,
residual_layernorm_gelu; the device side is ksuite/rows.cuh and each .cu's
launchers), for their ``config`` column and for the variant tuners' ``runs``
conditions: which plan a row of n columns gets on this machine's GPU, and
on an H200 where there is none.
"""
from __future__ import annotations

from implementations._shared import cuda_variants


def regs_fit(n: int, vec: int, packs: int, max_threads: int) -> bool:
    """Whether ksuite::plan_regs (ksuite/rows.cuh) keeps an n-wide row in registers."""
    t = -(-(-(-n // vec)) // packs)
    return t <= 32 or -(-t // 32) * 32 <= max_threads


def cluster_ctas(packs: int, pack_bytes: int, smem_optin: int | None = None) -> int:
    """Mirror of ksuite::cluster_ctas: CTAs (<= 8) a row's slices need, 0 when none fit
    (``smem_optin``: the device's by default)."""
    smem_optin = cuda_variants.device().smem_optin if smem_optin is None else smem_optin
    for c in (1, 2, 4, 8):
        if -(-packs // c) * pack_bytes <= 64 * 1024:
            return c
    return 8 if -(-packs // 8) * pack_bytes + 1024 <= smem_optin else 0


def tma_ctas(packs16: int, target: int, smem_optin: int | None = None, stages: int = 1) -> int:
    """Mirror of softmax.cu's tma_ctas (stages=1) and persistent_ctas: CTAs
    (<= 8) for 16-byte-pack slices of <= target bytes, else 8 while `stages`
    slices a CTA fit its shared memory; 0 when they do not."""
    smem_optin = cuda_variants.device().smem_optin if smem_optin is None else smem_optin
    for c in (1, 2, 4, 8):
        if -(-packs16 // c) * 16 <= target:
            return c
    return 8 if -(-packs16 // 8) * 16 * stages + 2048 <= smem_optin else 0


def row_plan(n: int, size: int, staged_bytes: int, limits: cuda_variants.Limits | None = None, *,
             packs: int = 4, long_rows: str = "tma", tma_slice: int = 32 * 1024) -> str:
    """Python mirror of the row kernels' automatic launch choice, for the
    `config` column: ksuite::plan_regs (ksuite/rows.cuh) with ``packs``
    16-byte packs a thread (8 elements a thread on the unvectorised path),
    then for longer rows the cluster of the kernel's kind (sm_90 and newer).

    ``size`` is the element size in bytes, ``staged_bytes`` what one column
    takes in a cluster CTA's shared memory (the element for softmax, a float
    for layer norm); ``long_rows`` is "tma" (softmax: cp.async.bulk into
    slices of <= ``tma_slice`` bytes, softmax.cu's tma_ctas) or "cluster"
    (register loads, slices of <= 64 KB, ksuite::cluster_ctas);
    ``limits``: the device's (cuda_variants.device) by default.  Where there are
    no clusters or none fits, the text says "two reads a row".
    """
    limits = cuda_variants.device() if limits is None else limits
    vec = 16 // size if n % (16 // size) == 0 else 1
    per_thread = packs if vec > 1 else 8
    elems = per_thread * vec
    max_threads = 1024 if elems <= 32 else 256
    row_packs = -(-n // vec)
    t = -(-row_packs // per_thread)
    if t <= 32:
        lanes = 1
        while lanes < t:
            lanes *= 2
        return (f"registers: {lanes} lanes/row, {min(256, max_threads) // lanes} rows/block, "
                f"{per_thread} x {vec} elems/thread")
    tpr = -(-t // 32) * 32
    if tpr <= max_threads:
        return f"registers: block of {tpr}/row, {per_thread} x {vec} elems/thread"
    if long_rows == "tma" and vec > 1 and limits.clusters:
        ctas = tma_ctas(n // vec, tma_slice, limits.smem_optin)
        if ctas:
            return f"cluster of {ctas} x 256 threads, TMA slices of the row in shared memory, vec {vec}"
    ctas = cluster_ctas(n // vec, vec * staged_bytes, limits.smem_optin) if limits.clusters else 0
    if ctas:
        return f"cluster of {ctas} x 512 threads, row in shared memory, vec {vec}"
    return f"two reads a row (online stats), grid = SMs, vec {vec}"


def row_plan_first_fit(n: int, size: int, staged_bytes: int, packs: tuple[int, ...], **kw) -> str:
    """row_plan for a kernel that tries several pack counts in turn: the first
    that keeps the row in registers, else the last one's long-row plan."""
    for p in packs[:-1]:
        plan = row_plan(n, size, staged_bytes, packs=p, **kw)
        if plan.startswith("registers"):
            return plan
    return row_plan(n, size, staged_bytes, packs=packs[-1], **kw)
