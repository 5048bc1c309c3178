"""Correctness against a float64 reference: the whole output, and each element.

An output passes when all of these hold, tested in this order (the first
that fails names the row's ``check``):

- ``type``, ``shape``, ``dtype``: a tensor of the reference's shape in the
  case's dtype;
- ``finite``: no NaN or inf.  The harness poisons outputs with NaN in their
  own dtype before the checked call (:func:`poison_allocator`,
  :func:`poisoned_empty`), so an element a kernel never writes fails here;
- ``normwise``: ||out - ref|| / ||ref|| <= tol + sqrt(n) * u_acc, the
  workload's tolerance per dtype plus one random walk of the n roundings
  of a float32 sum (below); an average over the whole output: one wrong
  row in 32768 moves it by 1/181, which a 16-bit tolerance lets through;
- ``elementwise``: every element within what the dtype's own rounding allows,

      |out - ref| <= e * (|ref| + s_row + floor + tiny),
      e = k * u + 8 * sqrt(n) * u_acc.

  u is the unit roundoff of the output's dtype (2^-24 float32, 2^-11
  float16, 2^-8 bfloat16), or of the implementation's coarser math mode
  (2^-11 for tf32): a correctly rounded result is within u * |ref|, and
  ``k`` (the workload's ``rounding``) allows for the roundings of a chain
  of ops in that dtype.  u_acc = 2^-24 is float32's: every kernel must
  accumulate in float32 or better, and a sum of n terms loses about
  sqrt(n) * u_acc (probabilistic rounding error analysis: independent
  roundings add up as a random walk; the factor 8 covers the worst of 2^30
  elements); n is the workload's ``reduction_length``.  s_row is the RMS of
  the reference over the output's last dimension (a row; the whole vector
  for a 1-D output), so that elements near zero are held to the size of
  their row rather than to a relative accuracy no formula has; where a
  workload's columns are as much a scale as its rows
  (``Workload.check_columns``: every element the same kind of sum, so that
  a one-column output, whose row is the element itself, is not held to a
  value that cancellation brought near zero), the larger of the row's and
  the column's RMS.  ``floor``
  is the workload's absolute floor, for outputs whose error follows the
  inputs rather than the outputs (y = x * f(x) with f accurate to a few u
  absolute errs by about |x| * u, which for a short vector of small outputs
  is far above their RMS).  ``tiny`` is the dtype's smallest normal
  number, below which its spacing is absolute.  A zeroed or uniform row
  breaks the bound at its largest element whenever e < 1/2, and e is at
  most 1/16.

  Where a workload's output amplifies the float32 rounding of its inputs
  row by row (a row normalised by its mean and spread: values far from zero
  with a small spread lose about u_acc * max|h| / std to the subtraction of
  the mean), the workload names each row's condition number kappa
  (``Workload.row_condition``) and that row's bound becomes
  e + CONDITION_FACTOR * kappa * u_acc; a well-conditioned row (kappa a few
  units) gains a few u_acc.

The harness runs :func:`check` on the checked call and again on what was
timed (the last timed call, and each CUDA-graph input set).
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch

# Unit roundoff 2^-p of each format with p bits of precision.
UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "tf32": 2.0**-11,
                 "float16": 2.0**-11, "bfloat16": 2.0**-8}
ACCUMULATOR = "float32"
# lambda of the probabilistic accumulation bound (Higham and Mary: an error
# beyond lambda * sqrt(n) * u has probability below 2 exp(-lambda^2 / 2));
# 8 keeps that below 1e-5 for the worst of 2^30 elements.
SQRT_N_FACTOR = 8.0
CHUNK = 1 << 24  # elements per float64 temporary (128 MiB)
# u_acc's per unit of a row's condition number: a float32 two-pass mean-and-
# spread normalisation loses up to 4 of them (3.7-3.9 at rows of 3 to 41,
# 67 < kappa < 283); twice that.
CONDITION_FACTOR = 8.0


@dataclass(frozen=True)
class Rule:
    """What an output of one case must satisfy (see the module docstring)."""

    tol: float                # normwise relative error, before the reduction's allowance
    dtype: str | None = None  # the output dtype expected; None: not tested
    rounding: float | None = None  # k; None: no elementwise test
    reduction: int = 1        # n, the longest sum behind one output element
    math: str | None = None   # an arithmetic coarser than the dtype (tf32)
    floor: float = 0.0        # the workload's absolute floor
    columns: bool = False     # s_row: the larger of the row's RMS and the column's

    @property
    def unit(self) -> float:
        units = [UNIT_ROUNDOFF.get(d, 0.0) for d in (self.dtype, self.math) if d]
        return max(units) if units else UNIT_ROUNDOFF["float32"]

    @property
    def norm_tol(self) -> float:
        """The normwise bound: tol plus sqrt(n) * u_acc for the reduction."""
        return self.tol + math.sqrt(max(1, self.reduction)) * UNIT_ROUNDOFF[ACCUMULATOR]

    @property
    def elem_tol(self) -> float:
        """e: the elementwise bound, relative to |ref| + s_row + floor + tiny."""
        if self.rounding is None:
            return math.nan
        return (self.rounding * self.unit
                + SQRT_N_FACTOR * math.sqrt(max(1, self.reduction)) * UNIT_ROUNDOFF[ACCUMULATOR])


@dataclass
class Check:
    rel_err: float
    tol: float
    correct: bool
    message: str = ""
    check: str | None = None     # the test that failed; None when correct
    elem_err: float = math.nan   # worst |out - ref| / (|ref| + s_row + floor + tiny)
    elem_tol: float = math.nan


def rule_for(wl, case, impl=None) -> Rule:
    """The rule of ``case`` for ``impl`` (its own tolerance, rounding and math mode, if any)."""
    tol = ((impl.tolerance if impl is not None else None) or {}).get(case.dtype, wl.tolerance(case))
    rounding = getattr(impl, "rounding", None) or wl.rounding
    return Rule(tol=tol, dtype=case.dtype, rounding=rounding, reduction=wl.reduction_length(case),
                math=getattr(impl, "math", None), floor=wl.check_floor, columns=wl.check_columns)


def check_case(wl, case, out, ref: torch.Tensor, impl=None, inputs=None) -> Check:
    cond = wl.row_condition(case, inputs) if inputs is not None else None
    return check(out, ref, rule_for(wl, case, impl), cond)


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return _measure(out, ref, floor=1.0)[0]


def _row_blocks(rows: int, n: int):
    """(row slice, column slice) blocks of about CHUNK elements; a row longer
    than CHUNK is cut into column chunks."""
    if n >= CHUNK:
        for i in range(rows):
            for j in range(0, n, CHUNK):
                yield slice(i, i + 1), slice(j, j + CHUNK)
    else:
        step = max(1, CHUNK // max(n, 1))
        for i in range(0, rows, step):
            yield slice(i, i + step), slice(None)


def _measure(out: torch.Tensor, ref: torch.Tensor, floor: float, scale: torch.Tensor | None = None,
             columns: bool = False) -> tuple[float, float, tuple[int, int]]:
    """(normwise error, worst |out - ref| / (|ref| + row RMS + floor), (row, column) of the worst);
    ``scale``: per row, what that ratio is divided by (a looser bound for a row, as a factor);
    ``columns``: the row RMS is the larger of the row's and the column's."""
    n = ref.shape[-1] if ref.dim() else 1
    r2, o2 = ref.reshape(-1, n), out.reshape(-1, n)
    rows = r2.shape[0]
    sumsq = torch.zeros(rows, dtype=torch.float64, device=ref.device)
    colsq = torch.zeros(n, dtype=torch.float64, device=ref.device)
    for rs, cs in _row_blocks(rows, n):
        sq = r2[rs, cs].to(torch.float64).square()
        sumsq[rs] += sq.sum(-1)
        if columns:
            colsq[cs] += sq.sum(0)
    rms = (sumsq / max(n, 1)).sqrt()
    col_rms = (colsq / max(rows, 1)).sqrt()
    num = 0.0
    worst, where = 0.0, (0, 0)
    for rs, cs in _row_blocks(rows, n):
        r = r2[rs, cs].to(torch.float64)
        d = (o2[rs, cs].to(torch.float64) - r).abs_()
        num += float(d.square().sum().item())
        size = torch.maximum(rms[rs, None], col_rms[None, cs]) if columns else rms[rs, None]
        ratio = d.div_(r.abs().add_(size).add_(floor))
        if scale is not None:
            ratio.div_(scale[rs, None])
        if ratio.numel():
            flat = int(torch.argmax(ratio).item())
            value = float(ratio.reshape(-1)[flat].item())
            if value > worst or (math.isnan(value) and not math.isnan(worst)):
                width = r.shape[1]
                worst = value
                where = (rs.start + flat // width, (cs.start or 0) + flat % width)
    den = math.sqrt(float(sumsq.sum().item()))
    norm = (0.0 if num == 0.0 else math.inf) if den == 0.0 else math.sqrt(num) / den
    return norm, worst, where


def check(out, ref: torch.Tensor, rule: Rule | float, cond: torch.Tensor | None = None) -> Check:
    """Test ``out`` against the float64 ``ref``; a bare float is a normwise-only rule.
    ``cond``: each row's condition number (Workload.row_condition), or None."""
    if not isinstance(rule, Rule):
        rule = Rule(tol=float(rule))
    tol, etol = rule.norm_tol, rule.elem_tol

    def fail(test: str, message: str, rel_err: float = math.nan, elem_err: float = math.nan) -> Check:
        return Check(rel_err, tol, False, message, test, elem_err, etol)

    if not isinstance(out, torch.Tensor):
        return fail("type", f"returned {type(out).__name__}, not a tensor")
    if tuple(out.shape) != tuple(ref.shape):
        return fail("shape", f"shape {tuple(out.shape)} != expected {tuple(ref.shape)}")
    if rule.dtype is not None and str(out.dtype).removeprefix("torch.") != rule.dtype:
        return fail("dtype", f"dtype {str(out.dtype).removeprefix('torch.')} != expected {rule.dtype}")
    finite = bool(torch.isfinite(out).all().item()) if out.numel() else True
    if not finite:
        bad = int((~torch.isfinite(out)).sum().item())
        return fail("finite", f"{bad} of {out.numel()} elements are NaN or inf")
    if not out.numel():
        return Check(0.0, tol, True, "", None, 0.0, etol)
    tiny = torch.finfo(out.dtype).tiny if out.is_floating_point() else 1.0
    scale = None
    if cond is not None and rule.rounding is not None:
        # row r's bound, e + CONDITION_FACTOR * kappa_r * u_acc, as a multiple of e
        extra = CONDITION_FACTOR * UNIT_ROUNDOFF[ACCUMULATOR] / etol
        scale = cond.to(device=ref.device, dtype=torch.float64).reshape(-1).mul(extra).add_(1.0)
    err, elem, (row, col) = _measure(out, ref, tiny + rule.floor, scale, rule.columns)
    if not err <= tol:
        return fail("normwise", f"relative error {err:.3g} > tolerance {tol:.3g}", err, elem)
    if rule.rounding is not None and not elem <= etol:
        n = ref.shape[-1] if ref.dim() else 1
        o = float(out.reshape(-1, n)[row, col].item())
        r = float(ref.reshape(-1, n)[row, col].item())
        return fail("elementwise", f"element (row {row}, column {col}) is {o:.6g} against {r:.6g}: "
                    f"error {elem:.3g} of |ref| + {'row or column' if rule.columns else 'row'} RMS"
                    f"{' + floor' if rule.floor else ''} > bound {etol:.3g} "
                    f"({elem / rule.unit:.1f} units of {rule.unit:.3g})"
                    + (f"; the row's condition {float(cond.reshape(-1)[row]):.3g} is in the bound"
                       if scale is not None else ""), err, elem)
    return Check(err, tol, True, "", None, elem, etol)


def poison_(t: torch.Tensor) -> torch.Tensor:
    """Fill with NaN in ``t``'s own dtype (floating point) or an absurd value."""
    if t.is_floating_point() or t.is_complex():
        return t.fill_(math.nan)
    return t.fill_(-12345 if t.dtype != torch.bool else True)


POISON_BLOCKS = 4


def poison_allocator(device: str, nbytes: float, dtype: torch.dtype = torch.float32) -> None:
    """Hand the caching allocator NaN-filled blocks of about ``nbytes``.

    Implementations allocate their own outputs; on CUDA the next allocation of
    a similar size reuses a freed block, so filling and freeing blocks first
    makes an output element that a kernel never writes read back as NaN.  The
    NaN is ``dtype``'s: a float32 NaN (0x7FC00000) read as bfloat16 or
    float16 is a NaN and a zero, so half the unwritten elements would pass.
    Blocks start 512-byte aligned, so every element of an output of ``dtype``
    lines up with one NaN.  Several blocks, for implementations that allocate
    temporaries before their output.
    """
    if device != "cuda" or nbytes <= 0:
        return
    size = torch.empty((), dtype=dtype).element_size()
    blocks = [poison_(torch.empty(max(1, int(nbytes) // size), dtype=dtype, device=device))
              for _ in range(POISON_BLOCKS)]
    del blocks


_FACTORIES = ("empty", "empty_like", "empty_strided")


@contextlib.contextmanager
def poisoned_empty():
    """While inside, ``torch.empty``, ``empty_like`` and ``empty_strided`` called
    from Python return tensors filled with NaN of their own dtype.

    This reaches the outputs that Python launchers (Triton's, a plugin's)
    allocate, on any device; the CPU allocator cannot be poisoned otherwise.
    Outputs that ATen or a C++ extension allocates are reached on CUDA by
    :func:`poison_allocator`.
    """
    real = {name: getattr(torch, name) for name in _FACTORIES}

    def wrap(fn):
        def poisoned(*args, **kwargs):
            t = fn(*args, **kwargs)
            # plain tensors only: not the fake, meta or grad-requiring ones that
            # torch.compile makes while it traces or compiles
            if type(t) is not torch.Tensor or t.is_meta or t.requires_grad or torch.compiler.is_compiling():
                return t
            with torch.no_grad():
                return poison_(t)
        return poisoned

    try:
        for name, fn in real.items():
            setattr(torch, name, wrap(fn))
        yield
    finally:
        for name, fn in real.items():
            setattr(torch, name, fn)
