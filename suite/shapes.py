"""Shapes a user asks for (``--shape K=V,...``, ``--shapes FILE``) and the
sizes the ``fuzz`` preset draws (:func:`fuzz_size`).

Both give Cases tagged with where their shape came from (``cli``,
``file:PATH``; a preset's cases carry ``preset:NAME``), stored as the rows'
``shape_source``.  Everything is checked before anything is allocated: the
keys against the workload's ``shape_keys`` (none unknown, none missing), the
values (positive integers; ``causal`` 0 or 1, or true/false), and the bytes a
case holds at once (``Workload.memory_bytes``) against the device's free
memory.  Any problem is a UsageError: one line, exit code 2.

A ``--shape`` without ``--workloads`` applies to every workload whose keys are
exactly the ones given (``M=..,N=..`` fits every workload keyed by M and N).
The file holds one TOML table per workload, or several as an array of tables;
a list value is swept, and a table's cases are the product of its lists::

    [NAME]                    # a workload's name, as `python -m suite list` shows it
    M = [4096]
    N = [32000, 50257, 128256]
    dtypes = ["bfloat16"]     # optional; --dtypes overrides it
"""
from __future__ import annotations

import itertools
import math
import os
import random
from pathlib import Path
from typing import Any, Iterable

from suite.args import UsageError
from suite.workload import DTYPES, Case, Workload

FLAGS = ("causal",)  # keys that hold 0 or 1 rather than a size


def parse_value(key: str, raw: Any, where: str) -> int:
    """One dimension's value: a positive integer, or 0/1 (true/false) for a flag."""
    if key in FLAGS:
        text = str(raw).strip().lower()
        if text in ("1", "true"):
            return 1
        if text in ("0", "false"):
            return 0
        raise UsageError(f"{where}: {key} must be 0 or 1 (or true/false), not {raw!r}")
    if isinstance(raw, bool) or isinstance(raw, float):
        raise UsageError(f"{where}: {key} must be a positive integer, not {raw!r}")
    text = str(raw).strip()
    # ASCII digits only: int() also reads 1_000, +5 and other scripts' digits
    if not isinstance(raw, int) and not (text.isascii() and text.isdigit()):
        raise UsageError(f"{where}: {key} must be a positive integer, not {raw!r}")
    value = int(text)
    if value <= 0:
        raise UsageError(f"{where}: {key} must be a positive integer, not {raw!r}")
    return value


def _keys_text(wl: Workload) -> str:
    return ", ".join(wl.shape_keys)


def check_keys(wl: Workload, keys: Iterable[str], where: str, extra: tuple[str, ...] = ()) -> None:
    """UsageError unless ``keys`` (besides ``extra``) are exactly the workload's shape keys."""
    keys = list(keys)
    unknown = [k for k in keys if k not in wl.shape_keys and k not in extra]
    if unknown:
        raise UsageError(f"{where}: {wl.name} has no dimension {', '.join(map(repr, unknown))}; "
                         f"its keys are {_keys_text(wl)}")
    missing = [k for k in wl.shape_keys if k not in keys]
    if missing:
        raise UsageError(f"{where}: {wl.name} needs {', '.join(missing)} too; its keys are {_keys_text(wl)}")


def _dtypes_for(wl: Workload, dtypes: Iterable[str] | None) -> list[str]:
    return [d for d in (dtypes or wl.dtypes) if d in wl.dtypes]


def _cases(wl: Workload, dims: dict[str, list[int]], dtypes: Iterable[str] | None, source: str) -> list[Case]:
    """The product of ``dims`` (in the workload's key order, as the presets
    label them) times the dtypes."""
    keys = wl.shape_keys
    out = []
    for values in itertools.product(*(dims[k] for k in keys)):
        shape = tuple(zip(keys, values))
        out += [Case(wl.name, d, shape, source) for d in _dtypes_for(wl, dtypes)]
    return out


def parse_shape(text: str) -> dict[str, str]:
    """``"M=3000,N=5000"`` -> ``{"M": "3000", "N": "5000"}`` (values unparsed)."""
    where = f"--shape {text}"
    out: dict[str, str] = {}
    for item in (t.strip() for t in text.split(",")):
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key or not value:
            raise UsageError(f"{where}: expected KEY=VALUE pairs separated by commas, e.g. M=4096,N=4096")
        if key in out:
            raise UsageError(f"{where}: {key} is given twice")
        out[key] = value
    return out


def cli_cases(specs: list[str], workloads: dict[str, Workload], named: list[str] | None,
              dtypes: list[str] | None) -> list[Case]:
    """The cases of each ``--shape``, for the workloads in ``named`` (--workloads)
    or, when none are named, every workload whose shape keys match exactly."""
    cases: list[Case] = []
    for spec in specs:
        raw = parse_shape(spec)
        where = f"--shape {spec}"
        if named:
            targets = [workloads[w] for w in named]
            if len({frozenset(wl.shape_keys) for wl in targets}) > 1:
                raise UsageError(f"{where}: the workloads take different shape keys ("
                                 + "; ".join(f"{wl.name}: {_keys_text(wl)}" for wl in targets)
                                 + "); give one --shape per group with its own --workloads, or use --shapes FILE")
            check_keys(targets[0], raw, where)
        else:
            targets = [wl for _, wl in sorted(workloads.items()) if set(wl.shape_keys) == set(raw)]
            if not targets:
                raise UsageError(f"{where}: no workload takes exactly the keys {', '.join(raw)}; "
                                 + "; ".join(f"{n}: {_keys_text(wl)}" for n, wl in sorted(workloads.items())))
        dims = {k: [parse_value(k, v, where)] for k, v in raw.items()}
        for wl in targets:
            cases += _cases(wl, dims, dtypes, "cli")
    return cases


def _load_toml(path: Path) -> dict:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib
        except ImportError:
            raise UsageError(f"--shapes {path}: reading TOML needs Python 3.11 or the tomli package "
                             "(pip install tomli)") from None
    try:
        text = path.read_text(encoding="utf-8")  # TOML is UTF-8 whatever the locale says
    except OSError as exc:
        raise UsageError(f"--shapes {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"--shapes {path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} "
                         f"at offset {exc.start}); TOML files are UTF-8") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def file_cases(path: str | os.PathLike, workloads: dict[str, Workload], named: list[str] | None,
               dtypes: list[str] | None) -> list[Case]:
    """The cases of a shapes file; tables of workloads outside ``named`` are
    checked but not run.  ``dtypes`` (--dtypes) overrides a table's own."""
    path = Path(path)
    source = f"file:{path}"
    cases: list[Case] = []
    for name, body in _load_toml(path).items():
        if name not in workloads:
            raise UsageError(f"{path} [{name}]: unknown workload; choose from {', '.join(sorted(workloads))}")
        wl = workloads[name]
        tables = body if isinstance(body, list) else [body]
        for i, table in enumerate(tables):
            where = f"{path} [[{name}]] #{i + 1}" if isinstance(body, list) else f"{path} [{name}]"
            if not isinstance(table, dict):
                raise UsageError(f"{where}: expected a table of shape keys ({_keys_text(wl)}) and dtypes")
            check_keys(wl, table, where, extra=("dtypes",))
            dims = {}
            for key in wl.shape_keys:
                values = _as_list(table[key])
                if not values:
                    raise UsageError(f"{where} {key}: an empty list sweeps nothing")
                dims[key] = [parse_value(key, v, f"{where} {key}") for v in values]
            own = [str(d) for d in _as_list(table.get("dtypes", []))]
            bad = [d for d in own if d not in DTYPES]
            if bad:
                raise UsageError(f"{where} dtypes: unknown dtype {', '.join(map(repr, bad))}; "
                                 f"choose from {', '.join(DTYPES)}")
            if named is None or name in named:
                cases += _cases(wl, dims, dtypes or own or None, source)
    return cases


def free_memory(device: str) -> int | None:
    """Bytes free for a case: the GPU's free memory, or the host's available RAM."""
    if device == "cuda":
        import torch

        return int(torch.cuda.mem_get_info()[0])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_fits(cases: Iterable[Case], workloads: dict[str, Workload], device: str,
               free: int | None = None) -> None:
    """UsageError naming the first case whose inputs, output and float64
    reference would not fit in the free memory (checked before allocating)."""
    cases = list(cases)
    if not cases:
        return
    free = free_memory(device) if free is None else free
    if free is None:
        return
    where = "the GPU has" if device == "cuda" else "the host has"
    for case in cases:
        need = workloads[case.workload].memory_bytes(case)
        if need > free:
            raise UsageError(f"{case} ({case.source}): its inputs, output and float64 reference need about "
                             f"{need / 2**30:.1f} GiB and {where} {free / 2**30:.1f} GiB free; "
                             "use a smaller shape")


def is_prime(n: int) -> bool:
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    return all(n % d for d in range(3, math.isqrt(n) + 1, 2))


def fuzz_size(rng: random.Random, lo: int, hi: int) -> int:
    """A size drawn log-uniformly from [lo, hi], then made as awkward as users'
    sizes are: a prime (2 draws in 5), odd (1 in 5), a multiple of 8 but not of
    64 (1 in 5), or round, a multiple of 128 (1 in 5; a power of two below
    128).  Kernels tuned to round sizes meet the first three; the last keeps the
    round sizes they were tuned on in the mix.  Always within [lo, hi]."""
    if not 1 <= lo <= hi:
        raise ValueError(f"fuzz_size: need 1 <= lo <= hi, got {lo}, {hi}")
    x = min(hi, max(lo, int(math.exp(rng.uniform(math.log(lo), math.log(hi + 1))))))
    kind = rng.randrange(5)
    if kind < 2:
        up = next((n for n in range(x, min(hi, x + 2000) + 1) if is_prime(n)), None)
        down = next((n for n in range(x, max(lo, x - 2000) - 1, -1) if is_prime(n)), None)
        y = up if up is not None else down
    elif kind == 2:
        y = x | 1
    elif kind == 3:
        y = 8 * max(1, round(x / 8))
        y += 8 if y % 64 == 0 else 0
    else:
        y = 128 * round(x / 128) if x >= 128 else 1 << (x.bit_length() - 1)
    return x if y is None or not lo <= y <= hi else y


def fuzz_rows(rng: random.Random, n: int, lo_elems: int, hi_elems: int, max_m: int | None = None) -> int:
    """A row count M for rows of ``n`` columns so that M * n falls in
    [lo_elems, hi_elems] where it can (at least 1 row, at most ``max_m``)."""
    lo = max(1, -(-lo_elems // n))
    hi = max(lo, hi_elems // n)
    if max_m is not None:
        hi = min(hi, max_m)
        lo = min(lo, hi)
    return fuzz_size(rng, lo, hi)
