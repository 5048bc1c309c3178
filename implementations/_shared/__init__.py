"""Kernel helpers several workloads use; not a workload (discovery skips it).

- cuda/ksuite/*.cuh: CUDA headers (packs, loads, reductions, GELU, row plans,
  bulk copies, mma PTX), and cuda_ext.py, which builds a workload's cuda/
  with them (docs/cuda.md);
- triton_math.py, gelu_math.py: float32 math for the Triton kernels;
- row_plans.py: Python mirrors of the CUDA row kernels' launch plans;
- autotune.py, row_tuning.py, l2_prefetch.py: Triton autotuning and L2
  prefetch; cuda_variants.py: run-time choice among a CUDA op's variants.
"""
