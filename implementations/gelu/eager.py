"""The erf formula as a user first writes it: five kernels, five round trips."""
import math

from suite.workload import register

_RSQRT2 = 1.0 / math.sqrt(2.0)


def gelu_eager(x):
    return 0.5 * x * (1.0 + (x * _RSQRT2).erf())


register("gelu", "eager", description="erf formula in tensor ops (about five kernels)")(gelu_eager)
