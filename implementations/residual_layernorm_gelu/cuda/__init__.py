"""Hand-written CUDA residual + LayerNorm + GELU: one read of x and r, one write.

Built by implementations._shared.cuda_ext on first use; called as
torch.ops.kernel_suite.residual_layernorm_gelu; ``residual_layernorm_gelu_v(...,
variant)`` runs one plan by number (see the .cu; 0 = auto), for device
benchmarks that compare them.
"""
from __future__ import annotations

from pathlib import Path

from implementations._shared import cuda_ext, cuda_variants, row_plans
from implementations._shared.cuda_variants import VariantTuner
from suite.backends import dtype_in
from suite.workload import itemsize, register

SOURCES = [Path(__file__).with_name("residual_layernorm_gelu.cu")]


def _fakes() -> None:
    import torch

    @torch.library.register_fake("kernel_suite::residual_layernorm_gelu")
    def _(x, r, weight, bias, eps):
        return torch.empty_like(x)

    @torch.library.register_fake("kernel_suite::residual_layernorm_gelu_v")
    def _(x, r, weight, bias, eps, variant):
        return torch.empty_like(x)


def ops():
    return cuda_ext.load("residual_layernorm_gelu", SOURCES, fakes=_fakes)


# the .cu's plans (residual_layernorm_gelu_v); one that cannot run a shape runs auto's
_TUNER = VariantTuner(tuple(range(1, 22)), {
    1: "row in registers, 4 packs of x and of r a thread",
    2: "row in registers, 2 packs a thread",
    3: "row in registers, 1 pack a thread",
    4: "cluster: the row split over 2..8 CTAs' shared memory",
    5: "two reads: shifted sums, then a backwards output pass",
    6: "row in registers, 4 packs a thread, plain ld.global",
    7: "row in registers, 1 pack a thread, plain ld.global",
    8: "persistent CTA a row, next row prefetched by TMA into shared memory",
    9: "persistent cluster of 2-8 CTAs a row, next row prefetched by TMA",
    10: "persistent cluster of 2-8 512-thread CTAs a row (two an SM), next row prefetched by TMA",
    11: "persistent cluster of 2-8 256-thread CTAs a row (four an SM), next row prefetched by TMA",
    12: "persistent cluster of 2-8 512-thread CTAs a row (one an SM), next two rows prefetched by TMA, "
        "w and b slices in shared memory",
    13: "persistent 512-thread CTA a row, 8 packs a thread, next row prefetched by TMA",
    14: "plan 13 with the row's statistics merged in one reduction (each thread's own two-pass "
        "statistics, combined by Chan's formula)",
    15: "plan 8 with plan 14's one-round statistics",
    16: "plan 12 with one-round statistics: one cluster exchange of (sum, squared deviations) a row",
    17: "plan 10 with one-round statistics: one cluster exchange a row",
    18: "any alignment: scalar head and tail, 16-byte body of x, r and y, 4 packs a thread, "
        "w and b by 32-bit words",
    19: "plan 18 at 8 packs a thread (<= 512 threads a row)",
    20: "cluster, the row split over 2..8 CTAs' shared memory, any alignment: scalar head and tail, "
        "16-byte body",
    21: "any alignment: a persistent CTA an SM, the next row's raw x and r bulk-copied into shared "
        "memory while this one is reduced and written from registers (1-4 packs a thread)"},
    runs=lambda v, key: _runs(v, *key))


# the .cu's any-alignment plans (launch_unaligned_rows): 16-byte packs a thread
_UNALIGNED_PACKS = {18: 4, 19: 8}
# the .cu's cluster at any alignment (launch_cluster, SPLIT): x, r and y equally misaligned, as allocated
_CLUSTER_SPLIT = 20
# the .cu's streamed rows (launch_stream): two buffers of a row's x and r, <= 4 packs a thread
_STREAM = 21
# the plans on thread-block clusters or TMA, whose launchers refuse devices before sm_90
_SM90 = frozenset((4, *range(8, 18), _CLUSTER_SPLIT, _STREAM))


def _runs(variant: int, dtype: str, n: int, _bucket: int) -> bool:
    """Mirror of the .cu's launch() on this machine's GPU (cuda_variants.device):
    which plans run as themselves (for inputs allocated by torch: base pointers
    on 16-byte boundaries)."""
    vec = 16 // itemsize(dtype)
    limits = cuda_variants.device()
    if variant in _SM90 and not limits.clusters:
        return False
    if variant in _UNALIGNED_PACKS:
        # launch_unaligned_rows: threads for the body's n // vec packs, <= 1024 of them at 4 packs a
        # thread, <= 512 at 8.  They run on 16-byte rows too, as register plans whose w and b are
        # read a word at a time (plan 1's design with more loads): not timed there.
        packs = _UNALIGNED_PACKS[variant]
        return n % vec != 0 and row_plans.regs_fit(n // vec * vec, vec, packs, 1024 if packs <= 4 else 512)
    if variant == _STREAM:
        # launch_stream: <= 1024 threads x 4 packs, two buffers of the row's x and r (sm_90).  Raced
        # at rows that are not 16-byte multiples from 512 packs (bf16 4096 columns); at 16-byte
        # rows it runs but is not timed (the TMA plans 8-17 are its aligned form)
        packs = n // vec
        return n % vec != 0 and 512 <= packs <= 4096 and 64 * packs + 1024 <= limits.smem_optin
    if variant == _CLUSTER_SPLIT:
        # the body's n // vec packs, as float, over 1..8 CTAs.  It runs on 16-byte rows too, as plan
        # 4 with w and b read a word at a time: not timed there.
        return n % vec != 0 and row_plans.cluster_ctas(n // vec, vec * 4) > 0
    if n % vec:
        vec = 1
    if variant in (1, 2, 3, 6, 7):
        packs = {1: 4, 2: 2, 3: 1, 6: 4, 7: 1}[variant] * (2 if vec == 1 else 1)
        return row_plans.regs_fit(n, vec, packs, 1024 if vec * packs <= 32 else 256)
    if variant == 4:
        return row_plans.cluster_ctas(n // vec, vec * 4) > 0
    if 8 <= variant <= 17:
        # launch_tma: 16-byte packs, <= threads x packs-a-thread of them a CTA (4096 for 8 and 13-15),
        # one CTA a row (8, 13-15) or 2..8 (9-12, 16, 17); 12 and 16 hold six such slices (<= 192 KB):
        # they fit whenever the slice does
        if vec == 1:
            return False
        packs, cap = n // vec, {9: 4096, 10: 2048, 11: 1024, 12: 2048, 16: 2048, 17: 2048}.get(variant, 4096)
        one = variant in (8, 13, 14, 15)
        ctas = 1 if one else 2
        while not one and ctas < 8 and -(-packs // ctas) > cap:
            ctas *= 2
        return -(-packs // ctas) <= cap
    return True


def _key(m: int, n: int, dtype: str) -> tuple:
    return (dtype, n, 1 << max(0, m - 1).bit_length())


def _auto_plan(case) -> str:
    """Mirror of the .cu's auto choice: registers, else the cluster (rows that
    are not 16-byte multiples: plan 20's 16-byte body where its slices fit),
    else two reads; before sm_90 (no clusters), launch_wide: one CTA a row
    with the row in its shared memory where it fits, else two reads."""
    n, size = case["N"], itemsize(case.dtype)
    limits = cuda_variants.device()
    plan = row_plans.row_plan_first_fit(n, size, 4, (2, 4) if size == 4 else (4,), limits=limits,
                                        long_rows="cluster")
    vec = 16 // size
    if not plan.startswith("registers") and not limits.clusters:
        if n * 4 + 1024 <= limits.smem_optin:
            plan = f"one 1024-thread CTA a row, row in shared memory as float, vec {vec if n % vec == 0 else 1}"
    elif not plan.startswith("registers") and n % vec:
        ctas = row_plans.cluster_ctas(n // vec, vec * 4, limits.smem_optin)
        if ctas:
            plan = f"cluster of {ctas} x 512 threads, row in shared memory, scalar head and tail, 16-byte body"
    return plan + " (auto plan)"


def _config(case) -> str:
    return _TUNER.config(_key(case["M"], case["N"], case.dtype), at=f"{case['M']}x{case['N']}") or _auto_plan(case)


@register("residual_layernorm_gelu", "cuda", available=cuda_ext.cuda_available,
          supports=dtype_in("float32", "float16", "bfloat16"), config=_config,
          description="CUDA: row in registers (two-pass mean and variance), TMA-fed persistent CTAs or "
                      "clusters for long rows (one exchange of merged statistics a row), two reads beyond; "
                      "plan autotuned among the .cu's variants")
def residual_layernorm_gelu_cuda(x, r, weight, bias, eps):
    n = x.shape[-1]
    m = x.numel() // max(n, 1)
    key = _key(m, n, str(x.dtype).removeprefix("torch."))
    return _TUNER.run(key, lambda v: ops().residual_layernorm_gelu_v(x, r, weight, bias, float(eps), v), at=f"{m}x{n}")
