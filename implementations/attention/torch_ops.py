"""F.scaled_dot_product_attention, free to choose its kernel or pinned to one."""
import torch
import torch.nn.functional as F

from suite.backends import dtype_in, needs_cuda
from suite.workload import register


@register("attention", "torch", description="F.scaled_dot_product_attention (PyTorch picks the kernel)")
def attention_torch(q, k, v, causal):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def _pinned(backend_name: str, dtypes: tuple[str, ...], needs_gpu: bool):
    def available(device: str):
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: F401
        except ImportError:
            return "this torch has no torch.nn.attention.sdpa_kernel"
        if not hasattr(SDPBackend, backend_name):
            return f"this torch has no SDPBackend.{backend_name}"
        if needs_gpu:
            err = needs_cuda(device)
            if err:
                return err
            if backend_name == "CUDNN_ATTENTION" and not torch.backends.cudnn.is_available():
                return "cuDNN is not available in this torch build"
            if torch.cuda.get_device_capability() < (8, 0):
                return "needs compute capability 8.0 or newer"
        return None

    def fn(q, k, v, causal):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(getattr(SDPBackend, backend_name)):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return fn, available, dtype_in(*dtypes)


for _name, _backend, _dtypes, _gpu in [
    ("torch:flash", "FLASH_ATTENTION", ("float16", "bfloat16"), True),
    ("torch:cudnn", "CUDNN_ATTENTION", ("float16", "bfloat16"), True),
    ("torch:efficient", "EFFICIENT_ATTENTION", ("float32", "float16", "bfloat16"), True),
]:
    _fn, _avail, _supports = _pinned(_backend, _dtypes, _gpu)
    register("attention", _name, available=_avail, supports=_supports,
             description=f"SDPA pinned to {_backend}")(_fn)
