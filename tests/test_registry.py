import pytest

from suite import workload as W
from suite.workload import Case, Implementation, discover

EXPECTED = {"gelu", "residual_layernorm_gelu", "softmax", "gemm", "attention"}


def test_discovers_the_five_workloads_from_their_folders():
    reg = discover()
    assert EXPECTED <= set(reg.workloads)
    for name in EXPECTED:
        names = {i.name for i in reg.for_workload(name)}
        assert {"compile", "compile:dynamic", "compile:max-autotune"} <= names
    assert {"eager", "torch"} <= {i.name for i in reg.for_workload("softmax")}
    assert "eager" not in {i.name for i in reg.for_workload("gemm")}
    assert "torch" not in {i.name for i in reg.for_workload("residual_layernorm_gelu")}
    assert {"torch:flash", "torch:cudnn", "torch:efficient"} <= {i.name for i in reg.for_workload("attention")}


def test_tests_can_register_an_extra_implementation():
    reg = discover()

    @W.register("gelu", "test:identity", supports=lambda c: None if c.dtype == "float32" else "fp32 only")
    def identity(x):
        return x

    try:
        impl = reg.get("gelu", "test:identity")
        assert impl.backend == "test" and impl.fn is identity
        assert impl.supports(Case.make("gelu", "float16", N=4)) == "fp32 only"
        assert impl in reg.for_workload("gelu")
    finally:
        reg.remove("gelu", "test:identity")


def test_registering_the_same_name_twice_is_an_error():
    reg = W.Registry()
    reg.add(Implementation("gelu", "x", fn=lambda x: x))
    with pytest.raises(ValueError, match="registered twice"):
        reg.add(Implementation("gelu", "x", fn=lambda x: -x))


def test_unavailable_says_why_and_a_crashing_probe_is_contained():
    impl = Implementation("gelu", "y", fn=lambda x: x, available=lambda d: 1 / 0)
    assert "availability check failed" in impl.check_available("cpu")
    reg = discover()
    assert reg.get("attention", "torch:flash").check_available("cpu") == "needs a CUDA GPU"


def test_case_labels_and_keys():
    c = Case.make("gemm", "bfloat16", M=3, N=5, K=7)
    assert c.label == "M=3,N=5,K=7" and c["K"] == 7 and c.dims == {"M": 3, "N": 5, "K": 7}
    assert c.key == ("gemm", "M=3,N=5,K=7", "bfloat16")
