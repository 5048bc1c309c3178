from implementations.gemm.torch_ops import gemm_torch
from suite.compiling import register_compiled

# gemm has no eager chain: compile the library call itself
register_compiled("gemm", gemm_torch)
