"""Attention as first written: the S x S scores live in memory between five kernels."""
import math

import torch

from suite.workload import register


def attention_eager(q, k, v, causal):
    s = q.shape[-2]
    scores = torch.matmul(q, k.transpose(-1, -2))
    scores = scores * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu_(1)
        scores = scores.masked_fill(mask, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v)


register("attention", "eager", description="scores, scale, mask, softmax, weighted sum")(attention_eager)
