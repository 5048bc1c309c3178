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


# The chain rounds the S x S scores to the dtype twice (q k^T, then scaled)
# before the softmax: a logit z errs by up to 2u|z|, and exp turns that into a
# relative error of P.  With thousands of keys the largest logits of randn
# inputs reach 4-5, so the keys that weigh most in O err by 8-10u before P and
# O are rounded: the worst element of a large case reaches ~16u, the
# workload's whole bound.  Held to 32u (bfloat16: 1/8 of |ref| + row RMS, so a
# wrong row still fails by four times), as are its torch.compile variants.
register("attention", "eager", description="scores, scale, mask, softmax, weighted sum",
         rounding=32.0)(attention_eager)
