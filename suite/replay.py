"""``python -m suite.replay SPEC``: one implementation's calls on one case, for a profiler.

SPEC is the JSON that ``spec()`` writes: the case, the implementation, the
seed its inputs were made with in the run, the plugins to import, and how many
calls to make.  The inputs are rebuilt as the timed run built them; ``warmup``
calls (compilation, autotuning, first-call allocations) run first, then the
op back to back for ``heat_ms`` (0 by default: ncu pauses the card before a
profiled kernel whatever ran before it), then the ``calls`` calls run between
``cudaProfilerStart`` and ``cudaProfilerStop``, so that
``ncu --profile-from-start off`` profiles exactly those calls' kernels.
Not a verb of the CLI: suite.ncu starts it under ncu.
"""
from __future__ import annotations

import json
import sys
import time


def spec(case, impl: str, seed: int, plugins, device_index: int, warmup: int, calls: int,
         l2: str, heat_ms: float = 0.0) -> dict:
    return {"workload": case.workload, "dtype": case.dtype, "shape": [list(kv) for kv in case.shape],
            "impl": impl, "seed": seed, "plugins": list(plugins), "device_index": device_index,
            "warmup": warmup, "calls": calls, "l2": l2, "heat_ms": heat_ms}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    s = json.loads(argv[0])
    import torch

    from suite.timing import Protocol, use_protocol
    from suite.workload import Case, discover

    use_protocol(Protocol(l2=s["l2"]))  # an autotuner in the warm-up times as the run did
    torch.cuda.set_device(s["device_index"])
    registry = discover(s["plugins"])
    case = Case(s["workload"], s["dtype"], tuple((k, int(v)) for k, v in s["shape"]))
    impl = registry.get(case.workload, s["impl"])
    inputs = registry.workloads[case.workload].make_inputs(case, "cuda", s["seed"])
    for _ in range(s["warmup"]):
        impl.fn(**inputs)
    torch.cuda.synchronize()
    start = time.perf_counter()
    while (time.perf_counter() - start) * 1e3 < s.get("heat_ms", 0.0):
        impl.fn(**inputs)
        torch.cuda.synchronize()  # one call in flight: the loop ends when the card has run heat_ms
    cudart = torch.cuda.cudart()
    cudart.cudaProfilerStart()
    for _ in range(s["calls"]):
        impl.fn(**inputs)
    torch.cuda.synchronize()
    cudart.cudaProfilerStop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
