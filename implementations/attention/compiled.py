from implementations.attention.eager import attention_eager
from suite.compiling import register_compiled

register_compiled("attention", attention_eager)
