from implementations.gelu.eager import gelu_eager
from suite.compiling import register_compiled

register_compiled("gelu", gelu_eager)
