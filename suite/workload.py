"""The contract between the harness and the implementations.

A :class:`Workload` describes a computation: its shapes, random inputs, a
float64 reference, and the napkin math (FLOPs, compulsory bytes, the eager
chain's bytes).  An :class:`Implementation` is one way to compute it, registered
with :func:`register` against ``(workload, impl name)``.  Workloads live in
``implementations/<name>/__init__.py`` and are found by :func:`discover`; every
other module in that folder (and its ``cuda/`` package) is imported so that its
``@register`` decorators run.  Adding a workload means adding a folder; adding a
backend means adding a module.  Nothing here knows any workload by name.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import pkgutil
import random
import re
import sys
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, Mapping

from suite.args import UsageError

DTYPES = ("float32", "float16", "bfloat16")
BACKENDS = ("eager", "torch", "compile", "triton", "cuda")
FUZZ = "fuzz"  # the preset whose shapes are drawn from the run's seed

# Module file name -> the backend it provides; used to name a module that
# failed to import, so `list` can still say which backend is missing and why.
_MODULE_BACKEND = {"eager": "eager", "torch_ops": "torch", "compiled": "compile",
                   "triton": "triton", "cuda": "cuda", "cuda_wgmma": "cuda"}


def torch_dtype(name: str):
    import torch

    try:
        return {"float32": torch.float32, "float16": torch.float16,
                "bfloat16": torch.bfloat16, "float64": torch.float64}[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; choose from {', '.join(DTYPES)}") from None


def itemsize(dtype: str) -> int:
    return {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}[dtype]


@dataclass(frozen=True, order=True)
class Case:
    """One point of a sweep: a workload at one shape and dtype.

    ``source`` says where the shape came from (``preset:quick``, ``cli``,
    ``file:PATH``) and is stored as the rows' ``shape_source``; it takes no
    part in equality or ordering, so a shape asked for twice is one case.
    """

    workload: str
    dtype: str
    shape: tuple[tuple[str, int], ...]
    source: str = field(default="", compare=False)

    @classmethod
    def make(cls, workload: str, dtype: str, **dims: int) -> "Case":
        return cls(workload, dtype, tuple((k, int(v)) for k, v in dims.items()))

    @property
    def dims(self) -> dict[str, int]:
        return dict(self.shape)

    def __getitem__(self, key: str) -> int:
        for k, v in self.shape:
            if k == key:
                return v
        raise KeyError(key)

    @property
    def label(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.shape)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.workload, self.label, self.dtype)

    def __str__(self) -> str:
        return f"{self.workload}[{self.label}] {self.dtype}"


class Workload:
    """Base class; subclasses fill in the class attributes and the methods."""

    name: ClassVar[str]
    shape_keys: ClassVar[tuple[str, ...]]
    bound: ClassVar[str]  # "memory" or "compute": what limits the large shapes
    # the backend a compute-bound workload's implementations are measured
    # against (the best of its variants on the same case), e.g. the vendor
    # library's; None: scored on SOL alone
    reference_backend: ClassVar[str | None] = None
    dtypes: ClassVar[tuple[str, ...]] = DTYPES
    # Normwise relative error allowed against the float64 reference.
    tolerances: ClassVar[dict[str, float]] = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}
    presets: ClassVar[dict[str, list[dict[str, int]]]] = {}
    # dtypes a preset sweeps when none are asked for: quick and fuzz keep
    # float32 and bfloat16 (the targets' dtypes), llm the models' bfloat16;
    # full and cpu sweep all three
    preset_dtypes: ClassVar[dict[str, tuple[str, ...]]] = {"quick": ("float32", "bfloat16"),
                                                          "fuzz": ("float32", "bfloat16"),
                                                          "llm": ("bfloat16",)}

    # the seeded preset: fuzz_count shapes from fuzz_shape(), a function of the run's seed
    fuzz_count: ClassVar[int] = 24

    def fuzz_shape(self, rng: random.Random, i: int) -> dict[str, int] | None:
        """The ``i``-th shape of the ``fuzz`` preset, drawn from ``rng`` (None: no fuzz preset).

        A workload overrides it with the ranges its users run; ``i`` lets it
        give each kind of shape (decode, vocabulary rows, ...) its share."""
        return None

    def preset_names(self) -> list[str]:
        return list(self.presets) + ([FUZZ] if self.fuzz_shape(random.Random(0), 0) is not None else [])

    def preset_shapes(self, preset: str, seed: int | None = None) -> list[dict[str, int]]:
        """The shapes of a preset; ``fuzz``'s are drawn afresh from ``seed`` (the
        same seed, the same shapes, whatever else the process has drawn)."""
        if preset == FUZZ and FUZZ not in self.presets:
            if seed is None:
                raise ValueError(f"the {FUZZ} preset needs a seed")
            if FUZZ not in self.preset_names():
                raise KeyError(preset)
            rng = random.Random(f"{FUZZ}:{self.name}:{seed}")
            shapes: list[dict[str, int]] = []
            for i in range(50 * self.fuzz_count):  # a repeat is drawn again, a bounded number of times
                shape = self.fuzz_shape(rng, len(shapes))
                if shape not in shapes:
                    shapes.append(shape)
                if len(shapes) == self.fuzz_count:
                    break
            return shapes
        if preset not in self.presets:
            raise KeyError(preset)
        return self.presets[preset]

    def cases(self, preset: str, dtypes: Iterable[str] | None = None, seed: int | None = None) -> list[Case]:
        shapes = self.preset_shapes(preset, seed)
        default = self.preset_dtypes.get(preset, self.dtypes)
        chosen = [d for d in (dtypes or default) if d in self.dtypes]
        return [replace(Case.make(self.name, d, **shape), source=f"preset:{preset}")
                for shape in shapes for d in chosen]

    def flops(self, case: Case) -> float:
        raise NotImplementedError

    def min_bytes(self, case: Case) -> float:
        raise NotImplementedError

    def eager_bytes(self, case: Case) -> float:
        raise NotImplementedError

    def memory_bytes(self, case: Case) -> float:
        """Bytes one case holds at once, estimated before anything is allocated
        (a user's shape that would not fit is refused up front): the inputs and
        the output in the case's dtype, which is ``min_bytes``, plus the float64
        copies of both that the reference computes with.  A workload whose
        reference needs more working space overrides it."""
        return self.min_bytes(case) * (1.0 + 8.0 / itemsize(case.dtype))

    def size(self, case: Case) -> int:
        """Problem size for plots: the number of output elements by default."""
        n = 1
        for _, v in case.shape:
            n *= v
        return n

    def make_inputs(self, case: Case, device: str, seed: int) -> dict[str, Any]:
        raise NotImplementedError

    def reference(self, case: Case, inputs: Mapping[str, Any]):
        raise NotImplementedError

    def tolerance(self, case: Case) -> float:
        return self.tolerances[case.dtype]

    # The elementwise test (suite.verify): every output element within
    # rounding * u + 8 * sqrt(reduction_length) * u_float32 of its reference,
    # relative to |ref| plus the RMS of its row plus check_floor.  ``rounding``
    # is the multiple of the dtype's unit roundoff u that an honest chain of
    # ops in that dtype loses; reduction_length the longest sum behind one
    # output element; check_floor an absolute magnitude for outputs whose
    # error follows the inputs' size rather than their own.
    rounding: ClassVar[float] = 8.0
    check_floor: ClassVar[float] = 0.0
    # True: an element near zero is held to the larger of its row's and its
    # column's RMS, where every output element is the same kind of sum
    check_columns: ClassVar[bool] = False

    def reduction_length(self, case: Case) -> int:
        return 1

    def row_condition(self, case: Case, inputs: Mapping[str, Any]):
        """Per output row (the reference reshaped to rows of its last dimension),
        how much the float32 computation amplifies the rounding of its inputs, as
        a float64 tensor, or None where nothing does (suite.verify)."""
        return None

    def write_bytes(self, case: Case) -> float:
        """Bytes a fully fused kernel writes (its outputs, once); with
        read_bytes, the traffic mix that picks the row's bandwidth roof.  A
        workload that does not say is held to the copy's mix (half and half)."""
        return self.min_bytes(case) / 2.0

    def read_bytes(self, case: Case) -> float:
        """Bytes a fully fused kernel reads: by default min_bytes less write_bytes."""
        return self.min_bytes(case) - self.write_bytes(case)


@dataclass
class Implementation:
    """One way to compute a workload: ``fn(**inputs) -> Tensor``.

    ``available(device)`` and ``supports(case)`` return ``None`` when fine and a
    reason otherwise.  ``config(case)`` describes what was chosen after warm-up
    (an autotuned block size, say).  ``math`` names the arithmetic used when it
    is not the dtype's own (``"tf32"``), which picks the matching ceiling.
    """

    workload: str
    name: str
    fn: Callable[..., Any]
    available: Callable[[str], str | None] = lambda device: None
    supports: Callable[[Case], str | None] = lambda case: None
    config: Callable[[Case], str | None] = lambda case: None
    tolerance: Mapping[str, float] | None = None
    math: str | None = None
    # the elementwise test's ``rounding`` (Workload.rounding) where this
    # implementation's honest chain of ops rounds more than the workload's does
    rounding: float | None = None
    description: str = ""
    # False: skipped by a sweep unless named with --impls (too slow to sweep)
    in_default_sweep: bool = True
    # the module that registered it (register records it): see ``source``
    module: str | None = None

    @property
    def backend(self) -> str:
        return self.name.split(":", 1)[0]

    @property
    def source(self) -> str:
        """``builtin`` for implementations/, else ``plugin:<path or module>`` as --plugin named it."""
        module = self.module or getattr(self.fn, "__module__", None) or "?"
        # the harness registers some on a workload's behalf (the compile backend)
        if module.split(".")[0] in ("implementations", "suite"):
            return "builtin"
        return f"plugin:{_PLUGIN_LABELS.get(module, module)}"

    def check_available(self, device: str) -> str | None:
        try:
            return self.available(device)
        except Exception as exc:  # an availability probe must never crash a listing
            return f"availability check failed: {exc}"


@dataclass
class Registry:
    workloads: dict[str, Workload] = field(default_factory=dict)
    impls: dict[tuple[str, str], Implementation] = field(default_factory=dict)
    # (workload, backend) -> reason, for backend modules that failed to import
    broken: dict[tuple[str, str], str] = field(default_factory=dict)

    def add_workload(self, wl: Workload) -> Workload:
        self.workloads[wl.name] = wl
        return wl

    def add(self, impl: Implementation) -> Implementation:
        key = (impl.workload, impl.name)
        if key in self.impls and self.impls[key].fn is not impl.fn:
            raise ValueError(f"implementation {impl.name!r} of {impl.workload!r} registered twice")
        self.impls[key] = impl
        return impl

    def remove(self, workload: str, name: str) -> None:
        self.impls.pop((workload, name), None)

    def for_workload(self, workload: str) -> list[Implementation]:
        return sorted((i for (w, _), i in self.impls.items() if w == workload), key=impl_sort_key)

    def get(self, workload: str, name: str) -> Implementation:
        return self.impls[(workload, name)]


def impl_sort_key(impl: Implementation) -> tuple[int, str]:
    backend = impl.backend
    rank = BACKENDS.index(backend) if backend in BACKENDS else len(BACKENDS)
    return (rank, impl.name)


REGISTRY = Registry()


def register_workload(cls: type[Workload]) -> type[Workload]:
    """Class decorator: instantiate and register a workload."""
    REGISTRY.add_workload(cls())
    return cls


def register(workload: str, name: str, **options: Any) -> Callable[[Callable], Callable]:
    """Decorator: ``@register("my_workload", "triton", available=..., supports=...)``."""

    def deco(fn: Callable) -> Callable:
        REGISTRY.add(Implementation(workload=workload, name=name, fn=fn,
                                    module=getattr(fn, "__module__", None), **options))
        return fn

    return deco


def impl_source(workload: str, name: str) -> str | None:
    """Where the registered implementation came from (a row's ``impl_source``)."""
    impl = REGISTRY.impls.get((workload, name))
    return impl.source if impl is not None else None


_discovered = False


def discover(plugins: Iterable[str] = ()) -> Registry:
    """Import every workload package under ``implementations`` and its modules.

    Packages and modules whose names start with ``_`` are helpers, not
    workloads or backends, and are left to be imported by what uses them.

    ``plugins`` names extra modules or ``.py`` files to import (a user's own
    implementations; tests' fault-injecting ones); the runner hands the same
    list to its worker processes.  One that cannot be imported is a
    :class:`PluginError` naming it.
    """
    global _discovered
    if not _discovered:
        _discovered = True
        import implementations

        for pkg in sorted(pkgutil.iter_modules(implementations.__path__), key=lambda m: m.name):
            if not pkg.ispkg or pkg.name.startswith("_"):
                continue
            name = f"implementations.{pkg.name}"
            try:
                mod = importlib.import_module(name)
            except Exception:
                REGISTRY.broken[(pkg.name, "*")] = _import_failure(name)
                continue
            for sub in sorted(pkgutil.iter_modules(mod.__path__), key=lambda m: m.name):
                if sub.name.startswith("_"):
                    continue
                try:
                    importlib.import_module(f"{name}.{sub.name}")
                except Exception:
                    backend = _MODULE_BACKEND.get(sub.name, sub.name)
                    REGISTRY.broken[(pkg.name, backend)] = _import_failure(f"{name}.{sub.name}")
    for plugin in plugins:
        import_plugin(plugin)
    return REGISTRY


class PluginError(UsageError):
    """A --plugin that cannot be imported: one line naming it, exit code 2."""


# module name -> the --plugin text that loaded it (a path as given, or the module)
_PLUGIN_LABELS: dict[str, str] = {}


def is_plugin_path(plugin: str) -> bool:
    return plugin.endswith(".py") or "/" in plugin or "\\" in plugin


def plugin_module_name(path: str | Path) -> str:
    """A stable module name for a plugin file: the same in the runner and its workers."""
    resolved = Path(path).expanduser().resolve()
    digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:10]
    return f"ksuite_plugin_{re.sub(r'[^0-9A-Za-z_]', '_', resolved.stem)}_{digest}"


def import_plugin(plugin: str):
    """Import a module by name, or a ``.py`` file by path under plugin_module_name()."""
    try:
        if not is_plugin_path(plugin):
            _PLUGIN_LABELS[plugin] = plugin
            return importlib.import_module(plugin)
        path = Path(plugin).expanduser()
        if path.is_dir():
            raise PluginError(f"--plugin {plugin}: a folder, not a file; name a .py file in it "
                              f"(or a module by its name)")
        if not path.is_file():
            raise PluginError(f"--plugin {plugin}: no such file")
        name = plugin_module_name(path)
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise PluginError(f"--plugin {plugin}: not a Python file")
        module = importlib.util.module_from_spec(spec)
        _PLUGIN_LABELS[name] = plugin
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        return module
    except PluginError:
        raise
    except Exception as exc:  # SyntaxError, ImportError, anything its top level raises
        raise PluginError(f"--plugin {plugin}: {_one_line(exc)}") from None


def _one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SyntaxError) and exc.filename:
        text = f"SyntaxError: {exc.msg} ({exc.filename}, line {exc.lineno})"
    return text.strip().splitlines()[0][:300]


def _import_failure(module: str) -> str:
    last = traceback.format_exc().strip().splitlines()[-1]
    return f"import of {module} failed: {last}"
