"""Kernel helpers several workloads use: the CUDA headers (cuda/ksuite/*.cuh)
and their build (cuda_ext).  Not a workload: discovery skips it.
"""
