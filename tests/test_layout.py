"""The layout's two rules, checked on the tree.

- suite/ is the harness: it names no workload (not in code, strings,
  comments or help text) and holds no kernel code.  "matmul" is allowed: the
  ceiling it measures is the device's matmul rate, not a workload.
- implementations/<workload>/ imports nothing from another workload's
  folder: what two workloads share lives in implementations/_shared/, which
  imports from no workload.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "suite"
IMPLS = ROOT / "implementations"
KERNEL_SUFFIXES = {".cu", ".cuh", ".h", ".hpp", ".cpp"}

WORKLOADS = sorted(p.name for p in IMPLS.iterdir()
                   if p.is_dir() and not p.name.startswith("_") and (p / "__init__.py").is_file())
# The workload names and the words inside them that name an operation
# (written any way: layernorm, layer_norm, "layer norm").
WORDS = sorted(set(WORKLOADS) | {"gelu", "softmax", "layernorm", "layer_norm", "layer norm", "gemm",
                                 "attention"})
FORBIDDEN = re.compile("|".join(re.escape(w) for w in WORDS), re.IGNORECASE)


def _suite_files() -> list[Path]:
    return sorted(p for p in SUITE.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def test_workloads_found():
    assert {"gelu", "softmax", "residual_layernorm_gelu", "gemm", "attention"} <= set(WORKLOADS)


def test_suite_names_no_workload():
    hits = []
    for path in _suite_files():
        for no, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for m in FORBIDDEN.finditer(line):
                hits.append(f"{path.relative_to(ROOT)}:{no}: {m.group(0)!r} in {line.strip()}")
    assert not hits, "suite/ names a workload:\n" + "\n".join(hits)


def test_suite_holds_no_kernel_code():
    kernels = [str(p.relative_to(ROOT)) for p in _suite_files() if p.suffix in KERNEL_SUFFIXES]
    assert not kernels, f"kernel code in suite/ (it belongs in implementations/): {kernels}"


def _imported(path: Path, package: str) -> set[str]:
    """Absolute names of the modules ``path`` (in ``package``) imports."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def _foreign_imports(folder: Path, allowed: str | None, root: Path = ROOT,
                     workloads: list[str] = WORKLOADS) -> list[str]:
    """Imports from a workload folder other than ``allowed`` by the modules under ``folder``."""
    bad = []
    for path in sorted(folder.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        package = ".".join(parts[:-1])
        for name in sorted(_imported(path, package)):
            top = name.split(".")
            if len(top) >= 2 and top[0] == "implementations" and top[1] in workloads and top[1] != allowed:
                bad.append(f"{path.relative_to(root)} imports {name}")
    return bad


@pytest.mark.parametrize("workload", WORKLOADS)
def test_workload_imports_no_other_workload(workload):
    bad = _foreign_imports(IMPLS / workload, workload)
    assert not bad, "\n".join(bad)


def test_shared_helpers_import_no_workload():
    bad = _foreign_imports(IMPLS / "_shared", None)
    assert not bad, "\n".join(bad)


def test_the_checks_can_fail(tmp_path):
    # Sideways imports (relative, absolute, of a whole package) are caught,
    # the workload's own are not; a word is found in any spelling.
    pkg = tmp_path / "implementations" / "alpha" / "cuda"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from ...beta.triton import kernel\nimport implementations.gamma\n"
                                     "from implementations import beta\nfrom .. import eager\n"
                                     "from implementations.alpha.triton import k\n")
    bad = _foreign_imports(tmp_path / "implementations" / "alpha", "alpha", tmp_path, ["alpha", "beta", "gamma"])
    assert [b.split(" imports ")[1] for b in bad] == [
        "implementations.beta", "implementations.beta.triton", "implementations.beta.triton.kernel",
        "implementations.gamma"]
    assert FORBIDDEN.search("a Layer Norm example") and FORBIDDEN.search("SoftMax")
    assert not FORBIDDEN.search("the matmul rate of this device")
