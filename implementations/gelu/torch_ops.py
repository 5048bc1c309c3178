import torch.nn.functional as F

from suite.workload import register


@register("gelu", "torch", description="F.gelu (ATen's fused kernel)")
def gelu_torch(x):
    return F.gelu(x)
