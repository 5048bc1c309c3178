"""Sizes of open models, for the workloads' ``llm`` presets.

Every number is a field of the model's config.json on the Hugging Face Hub,
named in the comment beside it; the head dim is hidden / heads (none of these
configs has a head_dim field).  Token counts are the presets' own choice:
PREFILL is one 4096-token prompt (or several shorter ones), DECODE rows are a
batch of sequences that each produce one token, 1 to 16 of them.
"""
from __future__ import annotations

from dataclasses import dataclass

PREFILL = 4096
DECODE = (1, 8, 16)


@dataclass(frozen=True)
class Model:
    name: str
    hidden: int
    intermediate: int
    vocab: int
    heads: int
    kv_heads: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


# meta-llama/Meta-Llama-3-8B: hidden_size 4096, intermediate_size 14336,
# vocab_size 128256, num_attention_heads 32, num_key_value_heads 8
# (max_position_embeddings 8192)
LLAMA3_8B = Model("Llama-3-8B", hidden=4096, intermediate=14336, vocab=128256, heads=32, kv_heads=8)
# Qwen/Qwen2.5-7B: hidden_size 3584, intermediate_size 18944, vocab_size 152064,
# num_attention_heads 28, num_key_value_heads 4
QWEN25_7B = Model("Qwen2.5-7B", hidden=3584, intermediate=18944, vocab=152064, heads=28, kv_heads=4)
# mistralai/Mistral-7B-v0.1: hidden_size 4096, intermediate_size 14336,
# vocab_size 32000, num_attention_heads 32, num_key_value_heads 8 (sliding_window 4096)
MISTRAL_7B = Model("Mistral-7B", hidden=4096, intermediate=14336, vocab=32000, heads=32, kv_heads=8)
# microsoft/Phi-3-mini-4k-instruct: hidden_size 3072, intermediate_size 8192,
# vocab_size 32064, num_attention_heads 32 (max_position_embeddings 4096); its
# qkv_proj is 3 x hidden wide, as many K/V heads as query heads; head dim 96,
# which the Triton and CUDA attention kernels do not instantiate
PHI3_MINI = Model("Phi-3-mini", hidden=3072, intermediate=8192, vocab=32064, heads=32, kv_heads=32)
# openai-community/gpt2: n_embd 768, n_head 12, vocab_size 50257 (n_positions
# 1024); n_inner is null, which means 4 * n_embd = 3072; no grouped KV heads
GPT2 = Model("GPT-2", hidden=768, intermediate=4 * 768, vocab=50257, heads=12, kv_heads=12)
GPT2_CONTEXT = 1024  # n_positions

MODELS = (LLAMA3_8B, QWEN25_7B, MISTRAL_7B, PHI3_MINI, GPT2)
