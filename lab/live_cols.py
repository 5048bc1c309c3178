"""Rows kernels with LIVE (the row's width rounded up to a warp's pass of 16-byte
accesses, a compile-time constant; see live_cols in implementations/_shared/row_tuning.py)
against the same configs without it.

A one-off device comparison (``python3 -m lab.live_cols`` on the H200; its output is in
lab/findings/): for residual_layernorm_gelu and softmax rows whose next power of two
leaves idle passes of a warp (640 float32 on 1024 lanes), every rows candidate the
autotuner would try is run with LIVE = 0 and with LIVE = live_cols(N), each checked
against float64 on a NaN-filled output and timed with the suite's events timer; the
shipped op (as the suite calls it) and torch.compile are timed beside them, and the copy
rate is measured in the same run.  Without a GPU it prints registers, spills and SASS
instructions of each pair for sm_90a instead.
"""
from __future__ import annotations

import os
import re
import subprocess
import tempfile

import triton

from implementations._shared.row_tuning import live_cols, row_align

RLG = (("float32", 19661, 640), ("float32", 49157, 384), ("float32", 33104, 609), ("float32", 1279, 5093),
       ("bfloat16", 33104, 609), ("bfloat16", 1597, 13437))
CONFIGS = 8  # the autotuner's first rows configs a case
SOFTMAX = (("float32", 45943, 307), ("bfloat16", 69729, 72), ("float32", 2816, 3467), ("bfloat16", 6883, 3600))


def _configs(workload: str, m: int, n: int, b: int) -> list[dict]:
    if workload == "residual_layernorm_gelu":
        from implementations.residual_layernorm_gelu.triton import candidates
    else:
        from implementations.softmax.triton import candidates
    return [c for c in candidates(m, n, b) if c["kernel"] == "rows"][:CONFIGS]


def _launch(workload: str, c: dict, args, m: int, n: int, live: int):
    """One rows config as the tuned launcher would run it, LIVE given; returns (y, compiled kernel)."""
    import torch

    const = {k: v for k, v in c.items() if k not in ("kernel", "num_warps", "maxnreg")}
    grid = (triton.cdiv(m, c["ROWS"]),)
    opts = dict(num_warps=c["num_warps"], **({"maxnreg": c["maxnreg"]} if c.get("maxnreg") else {}))
    if workload == "residual_layernorm_gelu":
        from implementations.residual_layernorm_gelu.triton import _rlg_rows, plan

        x, r, w, b, eps = args
        y = torch.empty_like(x)
        k = _rlg_rows[grid](x, r, w, b, y, m, n, float(eps), triton.next_power_of_2(m), EXACT=x.element_size() == 4,
                            EVEN_N=n == plan(m, n, x.element_size())["BLOCK_N"], ALIGN=row_align(n, x.element_size()),
                            LIVE=live, **const, **opts)
    else:
        from implementations.softmax.triton import _softmax_rows

        (x,) = args
        y = torch.empty_like(x)
        k = _softmax_rows[grid](x, y, m, n, triton.next_power_of_2(m), LIVE=live, **const, **opts)
    return y, k


def bench() -> None:
    from lab._probe import check_poisoned, print_table, registered_calls, time_us
    from suite.workload import Case, discover

    reg = discover()
    rows = []
    for workload, shapes in (("residual_layernorm_gelu", RLG), ("softmax", SOFTMAX)):
        wl = reg.workloads[workload]
        for dtype, m, n in shapes:
            case = Case.make(workload, dtype, M=m, N=n)
            inputs = wl.make_inputs(case, "cuda", 1234)
            ref = wl.reference(case, inputs)
            names = ("x", "r", "weight", "bias", "eps") if workload == "residual_layernorm_gelu" else ("x",)
            args = tuple(inputs[k] for k in names)
            gb = wl.min_bytes(case) / 1e9

            def rel(y, ref=ref) -> float:
                return ((y.double() - ref).norm() / ref.norm()).item()

            for name, fn in registered_calls(workload, case, inputs, ref, ["triton", "compile", "cuda"]).items():
                t = time_us(fn)
                row = (dtype, f"{workload[:4]} {m}x{n}", name, "", t, gb / t * 1e6, rel(fn()))
                print(row, flush=True)
                rows.append(row)
            b = args[0].element_size()
            for c in _configs(workload, m, n, b):
                label = " ".join(f"{k}={v}" for k, v in c.items() if k not in ("kernel",))
                for live in (0, live_cols(n, b)):
                    check_poisoned("rows", lambda c=c, live=live: _launch(workload, c, args, m, n, live)[0], ref,
                                   wl.tolerance(case), args[0].dtype)
                    _, k = _launch(workload, c, args, m, n, live)
                    t = time_us(lambda c=c, live=live: _launch(workload, c, args, m, n, live))
                    row = (dtype, f"{workload[:4]} {m}x{n}", f"{label} LIVE={live}", f"{k.n_regs} regs", t,
                           gb / t * 1e6, 0.0)
                    print(row, flush=True)
                    rows.append(row)
    print_table(rows, "rel. error")


def sass() -> None:
    """Registers, spill bytes and SASS instructions of each config without and with LIVE, for sm_90a."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from implementations.residual_layernorm_gelu.triton import _rlg_rows
    from implementations.softmax.triton import _softmax_rows

    nv = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    for workload, shapes in (("residual_layernorm_gelu", RLG), ("softmax", SOFTMAX)):
        for dtype, m, n in shapes:
            b = 4 if dtype == "float32" else 2
            p = "*fp32" if b == 4 else "*bf16"
            for c in _configs(workload, m, n, b):
                out = []
                for live in (0, live_cols(n, b)):
                    const = {k: v for k, v in c.items() if k not in ("kernel", "num_warps", "maxnreg")}
                    if workload == "residual_layernorm_gelu":
                        fn = _rlg_rows
                        sig = {k: p for k in ["x_ptr", "r_ptr", "w_ptr", "b_ptr", "y_ptr"]}
                        sig.update(M="i32", N="i32", eps="fp32", M_BUCKET="i32")
                        const.update(EXACT=b == 4, EVEN_N=False, ALIGN=row_align(n, b))
                    else:
                        fn = _softmax_rows
                        sig = {"x_ptr": p, "y_ptr": p, "M": "i32", "N": "i32", "M_BUCKET": "i32"}
                    const["LIVE"] = live
                    sig.update({k: "constexpr" for k in const})
                    attrs = {(i,): [["tt.divisibility", 16]] for i in range(5 if fn is _rlg_rows else 2)}
                    k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=const, attrs=attrs),
                                       target=GPUTarget("cuda", 90, 32), options={"num_warps": c["num_warps"]})
                    with tempfile.TemporaryDirectory() as d:
                        with open(f"{d}/k.ptx", "w") as f:
                            f.write(k.asm["ptx"])
                        log = subprocess.run([f"{nv}/ptxas", "-arch=sm_90a", "-v", f"{d}/k.ptx", "-o", f"{d}/k.cubin"],
                                             capture_output=True, text=True).stderr
                        code = subprocess.run([f"{nv}/cuobjdump", "-sass", f"{d}/k.cubin"], capture_output=True,
                                              text=True).stdout
                    out.append("%s regs %s spill %d sass" % (
                        re.search(r"Used (\d+) registers", log).group(1),
                        re.search(r"(\d+) bytes spill stores", log).group(1),
                        sum(1 for line in code.splitlines() if re.match(r"\s+/\*[0-9a-f]{4}\*/", line))))
                label = " ".join(f"{k}={v}" for k, v in c.items() if k != "kernel")
                print(f"{workload[:4]} {dtype} {m}x{n} {label}: {out[0]} -> {out[1]}", flush=True)


if __name__ == "__main__":
    import torch

    if torch.cuda.is_available():
        bench()
    else:
        sass()
