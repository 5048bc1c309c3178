import torch

from suite.workload import register


@register("gemm", "torch", description="torch.matmul (cuBLAS on the GPU)")
def gemm_torch(a, b):
    return torch.matmul(a, b)
