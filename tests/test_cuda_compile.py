"""CI without a GPU: every .cu under implementations/ must compile for the H200, and the
ones every GPU builds (portable_sources) for an A100 (sm_80) too.

nvcc builds each file for sm_90a with torch's headers and the same defines
the real extension build uses, so a syntax or type error in any kernel
(including ones added later: the list is a glob) fails here.  The shared
headers (implementations/_shared/cuda) are on the include path, as in the
real build.

Parsing torch's headers costs nvcc about 30 CPU-seconds a file (once in its
host pass, once in its device pass), most of this check's time.  So the
files that include them are compiled together, as one translation unit that
#includes each (their internal names are kept distinct for that); where that
unit fails, each of its files is compiled alone, so an error names its file.
The files that include no torch header are compiled one by one.

ptxas reports (-v) every kernel's registers and spills: each instantiation of
gemm_mma_kernel must not spill (it holds 128 fp32 accumulators a thread, at
the edge of the 255-register budget) and must fit as many CTAs on an SM as
its launch bounds ask, the figure the split-K plan's Python mirror uses;
the gelu, softmax and residual_layernorm_gelu kernels must not spill (two
pinned float16 softmax forms aside).
"""
from __future__ import annotations

import re
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from implementations._shared import cuda_ext
from suite import cuda_build

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "implementations").rglob("*.cu"))

needs_nvcc = pytest.mark.skipif(cuda_build.nvcc_path() is None, reason="nvcc not installed")


PTXAS_VERBOSE = ["-Xptxas", "-v"]


def _compile(source: Path, arch: str = "sm_90a") -> tuple[Path, str | None, float, str]:
    """(source, error or None, seconds, nvcc's output with ptxas's figures)."""
    start = time.perf_counter()
    try:
        log = cuda_ext.compile_check(source, arch=arch, extra_flags=PTXAS_VERBOSE)
        err = None
    except Exception as exc:
        err, log = str(exc), ""
    return source, err, time.perf_counter() - start, log


TORCH_INCLUDE = re.compile(r"^\s*#\s*include\s*<(torch|ATen|c10)/", re.M)


def includes_torch(source: Path) -> bool:
    return bool(TORCH_INCLUDE.search(source.read_text()))


def _compile_together(sources: list[Path], arch: str = "sm_90a") -> dict[Path, tuple[str | None, float, str]]:
    """One translation unit #including every source; on failure, each source
    alone.  Every source of the unit gets the unit's whole log."""
    with tempfile.TemporaryDirectory(prefix="ksuite-unit-") as tmp:
        unit = Path(tmp) / "together.cu"
        unit.write_text("".join(f'#include "{s}"\n' for s in sources))
        _, err, secs, log = _compile(unit, arch)
    if err is None:
        return {s: (None, secs, log) for s in sources}
    return {src: (e, t, lg) for src, e, t, lg in (_compile(s, arch) for s in sources)}


@pytest.fixture(scope="module")
def compiled() -> dict[Path, tuple[str | None, float, str]]:
    # nvcc is mostly single-threaded: the torch unit on one thread, the other
    # files on a second, matching the CI's two cores.
    heavy = [s for s in SOURCES if includes_torch(s)]
    light = [s for s in SOURCES if s not in heavy]
    with ThreadPoolExecutor(max_workers=2) as pool:
        together = pool.submit(_compile_together, heavy)
        alone = {src: (err, secs, log) for src, err, secs, log in pool.map(_compile, light)}
        return {**alone, **together.result()}


def portable_sources() -> list[Path]:
    """The .cu files that the ops build for the device's own arch on any GPU (all but
    the sm_90a extensions: cuda:wgmma's, and the cuda GEMM's Hopper forms)."""
    import implementations.attention.cuda as attention
    import implementations.gelu.cuda as gelu
    import implementations.gemm.cuda as gemm
    import implementations.residual_layernorm_gelu.cuda as rlg
    import implementations.softmax.cuda as softmax

    return sorted({*attention.SOURCES, *gelu.SOURCES, *gemm.SOURCES, *rlg.SOURCES, *softmax.SOURCES})


@pytest.fixture(scope="module")
def compiled_sm80() -> dict[Path, tuple[str | None, float, str]]:
    """The portable sources for sm_80 (an A100): Hopper-only code must stay behind
    its __CUDA_ARCH__ guards.  As for sm_90a, the torch unit on one thread."""
    sources = portable_sources()
    heavy = [s for s in sources if includes_torch(s)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        together = pool.submit(_compile_together, heavy, "sm_80")
        alone = {src: (err, secs, log)
                 for src, err, secs, log in pool.map(lambda s: _compile(s, "sm_80"), set(sources) - set(heavy))}
        return {**alone, **together.result()}


@needs_nvcc
def test_the_portable_sources_compile_for_sm_80(compiled_sm80):
    names = {p.name for p in compiled_sm80}
    assert {"gelu.cu", "softmax.cu", "gemm_mma.cu", "flash_attention.cu"} <= names
    assert not names & {"gemm_wgmma.cu", "gemm_ws.cu", "gemm_skinny_tma.cu", "gemm_tf32x3_wgmma.cu"}
    failed = {str(p.relative_to(ROOT)): err for p, (err, _, _) in compiled_sm80.items() if err}
    assert not failed, failed


def test_sources_found():
    assert SOURCES, "no .cu files under implementations/"


@needs_nvcc
@pytest.mark.parametrize("source", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_compiles_for_sm90a(source, compiled):
    err, secs, _ = compiled[source]
    assert err is None, err


@needs_nvcc
def test_a_broken_file_in_the_unit_is_named_alone(tmp_path):
    """Compiled together with a good file, a broken one fails the unit, and the
    fallback names the broken file only."""
    good, bad = tmp_path / "good.cu", tmp_path / "bad.cu"
    good.write_text("__global__ void k(float* y) { y[0] = 1.0f; }\n")
    bad.write_text("__global__ void k2(float* y) { int2 p = y; }\n")
    out = _compile_together([good, bad])
    assert out[good][0] is None and out[bad][0] and "bad.cu" in out[bad][0]
    assert "Used" in out[good][2]  # ptxas's figures of the good file's kernel


def test_every_torch_source_is_found(tmp_path):
    assert {s.name for s in SOURCES if includes_torch(s)} >= {"gelu.cu", "softmax.cu", "gemm_wgmma.cu"}
    plain = tmp_path / "plain.cu"
    plain.write_text('#include "ksuite/common.cuh"\n// #include <torch/extension.h> in a comment\n')
    assert not includes_torch(plain)


@needs_nvcc
def test_broken_source_fails(tmp_path):
    # The check itself must be able to fail: a type error in device code.
    bad = tmp_path / "bad.cu"
    bad.write_text("__global__ void k(float* y) { int2 p = y; }\n")
    with pytest.raises(RuntimeError, match="nvcc failed"):
        cuda_build.nvcc_compile_check(bad)


@needs_nvcc
def test_broken_host_code_fails(tmp_path):
    # The check stops before g++ generates host code; nvcc's front end must
    # still reject a type error in host code.
    bad = tmp_path / "bad_host.cu"
    bad.write_text("void launch(float* y) { double* d = y; (void)d; }\n")
    with pytest.raises(RuntimeError, match="nvcc failed"):
        cuda_build.nvcc_compile_check(bad)


# ---- ptxas's figures of gemm_mma_kernel ----------------------------------

def ptxas_kernels(log: str) -> dict[str, dict[str, int]]:
    """Mangled entry name -> registers, spill store and load bytes, static
    shared memory, from nvcc -Xptxas -v output."""
    out: dict[str, dict[str, int]] = {}
    name = None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '(\S+)'", line)
        if m:
            name = m.group(1)
            out[name] = {"regs": -1, "spill_st": -1, "spill_ld": -1, "smem": 0}
            continue
        if name is None:
            continue
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            out[name]["spill_st"], out[name]["spill_ld"] = int(m.group(1)), int(m.group(2))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            out[name]["regs"] = int(m.group(1))
            sm = re.search(r"(\d+) bytes smem", line)
            out[name]["smem"] = int(sm.group(1)) if sm else 0
    return out


# gemm_mma_kernel<T, TileConfig<BM, BN, BK, STAGES, MIN_BLOCKS, SPREAD>, ALIGNED, SPLIT>, mangled
GEMM_MMA = re.compile(r"gemm_mma_kernelI(6__half|13__nv_bfloat16)NS_10TileConfigILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)"
                      r"ELi(\d+)ELb([01])EEELb([01])ELb([01])E")


def sm90_ctas_per_sm(regs: int, threads: int, smem: int) -> int:
    """CTAs an sm_90 SM holds: 64K registers allocated 256 a warp at a time,
    228 KiB of shared memory with 1 KiB reserved a CTA, 2048 threads, 32 CTAs."""
    warps = threads // 32
    per_warp = -(-regs * 32 // 256) * 256
    return min((65536 // per_warp) // warps, (228 * 1024) // (smem + 1024), 2048 // threads, 32)


def test_ctas_per_sm_rule():
    # 255 registers, 128 threads, 74 KiB: two (registers); 168: three (shared memory)
    assert sm90_ctas_per_sm(255, 128, 75776) == 2
    assert sm90_ctas_per_sm(168, 128, 75776) == 3
    assert sm90_ctas_per_sm(240, 256, 157696) == 1


TILE_TABLE = re.compile(r"using Tile(\d+) = TileConfig<(\d+), (\d+), (\d+), (\d+), (\d+)(?:, true)?>;")


def test_tile_table_mirrored():
    """TILE_SHAPES and TILE_STAGES in implementations/gemm/cuda/__init__.py are gemm_mma.cu's
    tile table, and tile_smem gives the shared memory its comments state."""
    from implementations.gemm.cuda import TILE_SHAPES, TILE_STAGES, tile_smem

    text = (ROOT / "implementations/gemm/cuda/gemm_mma.cu").read_text()
    rows = TILE_TABLE.findall(text)
    table = {int(t): (int(bm), int(bn), int(bk), int(mb)) for t, bm, bn, bk, _, mb in rows}
    assert table == TILE_SHAPES
    assert {int(t): int(stages) for t, _, _, _, stages, _ in rows} == TILE_STAGES
    stated = {int(t): int(kib) for t, kib in re.findall(r"using Tile(\d+) = .*?(\d+) KiB", text)}
    assert {t: tile_smem(t) // 1024 for t in TILE_SHAPES} == stated


ATTN_CFG = re.compile(r"using D(\d+)V(\d+) = Cfg<(\d+), (\d+), (\d+), (\d+), (?:true|false), \d+"
                      r"(?:, (?:true|false), (?:true|false), (\d+))?>;")


def test_attention_tilings_mirrored():
    """VARIANTS in implementations/attention/cuda/__init__.py is flash_attention.cuh's Cfg
    table (rows, keys and stages), so its smem mirror is the kernel's."""
    from implementations.attention.cuda import VARIANTS, smem

    text = (ROOT / "implementations/attention/cuda/flash_attention.cuh").read_text()
    rows = ATTN_CFG.findall(text)
    assert len(rows) == sum(map(len, VARIANTS.values()))
    for d, v, d_, mt, warps, bn, stages in rows:
        d, v, stages = int(d), int(v), int(stages or 2)
        bm = int(warps) * 16 * int(mt)
        assert VARIANTS[d][v][0] == bm and VARIANTS[d][v][3] == int(bn), (d, v)
        assert smem(d, v) == (bm + 2 * stages * int(bn)) * (d + 8) * 2, (d, v)


@needs_nvcc
def test_gemm_mma_instantiations_fit_without_spills(compiled):
    """Every gemm_mma_kernel the op instantiates (float16 and bfloat16, tiles
    0-9 aligned and tile 0 guarded, each whole and split: 44) uses at most
    255 registers without spilling, except the guarded split kernel's one
    64-bit pointer in its copy block (GUARDED_SPLIT_SPILL bytes; its loads
    pass through registers, 64 a thread in flight), and holds the CTAs an SM
    that its launch bounds ask, which TILE_SHAPES (the split plan's mirror)
    states."""
    err, _, log = compiled[ROOT / "implementations/gemm/cuda/gemm_mma.cu"]
    assert err is None, err
    found = {}
    for name, fig in ptxas_kernels(log).items():
        m = GEMM_MMA.search(name)
        if m:
            dt, bm, bn, bk, stages, min_blocks, spread, aligned, split = m.groups()
            key = (dt, int(bm), int(bn), int(bk), int(stages), int(min_blocks), spread == "1", aligned == "1",
                   split == "1")
            found[key] = fig
    assert len(found) == 44, sorted(found)
    assert sum(1 for k in found if k[8]) == 22 and sum(1 for k in found if not k[7]) == 4
    bad = []
    for key, fig in found.items():
        _, bm, bn, bk, stages, min_blocks, _, aligned, split = key
        threads = bm // 64 * bn // 64 * 32
        dyn = max(stages * (bm * (bk + 8) + bk * (bn + 8)) * 2, bm * (bn + 8) * 2)
        spill_ok = GUARDED_SPLIT_SPILL if (split and not aligned) else 0
        if not (0 < fig["regs"] <= 255 and fig["spill_st"] <= spill_ok and fig["spill_ld"] <= spill_ok):
            bad.append((key, fig))
        if sm90_ctas_per_sm(fig["regs"], threads, dyn + fig["smem"]) != min_blocks:
            bad.append((key, fig, "CTAs an SM"))
    assert not bad, bad


GUARDED_SPLIT_SPILL = 8


@needs_nvcc
def test_gemm_tf32x3_kernels_fit_without_spills(compiled):
    """Both copies of the mma.sync 3xTF32 GEMM (16-byte and 4-byte chunks) and
    the four of the wgmma one (also one or two warpgroups) hold their 64
    accumulators and 64 per-k-tile partials under one CTA an SM's 255
    registers without spilling."""
    for source, name, count in (("gemm_tf32x3.cu", "gemm_tf32x3_kernel", 2),
                                ("gemm_tf32x3_wgmma.cu", "gemm_tf32x3_wgmma_kernel", 4)):
        err, _, log = compiled[ROOT / "implementations/gemm/cuda" / source]
        assert err is None, err
        kernels = {n: f for n, f in ptxas_kernels(log).items() if name in n}
        assert len(kernels) == count, sorted(kernels)
        assert all(0 < f["regs"] <= 255 and f["spill_st"] == 0 and f["spill_ld"] == 0
                   for f in kernels.values()), kernels


# ---- ptxas's figures of the memory-bound ops' kernels ----------------------

# Known spills (mangled-name fragment -> bytes stored and loaded, at most): two
# float16 softmax forms, left as they are (not timed without them).
MEMORY_BOUND_SPILLS = {
    "softmax_regs_kernelIN3c104HalfELi1ELi8E": 4,
    "softmax_unaligned_kernelIN3c104HalfELi4ELb0ELi0ELb1E": 16,
}
# each source's kernels, by name (the torch-including sources compile as one unit, whose log
# holds them all)
MEMORY_BOUND_KERNELS = {
    "implementations/gelu/cuda/gelu.cu": re.compile(r"\dgelu_(tile|scalar)_kernelI"),
    "implementations/softmax/cuda/softmax.cu": re.compile(r"\dsoftmax_\w+?_kernelI"),
    "implementations/residual_layernorm_gelu/cuda/residual_layernorm_gelu.cu": re.compile(r"\drlg_\w+?_kernelI"),
}


@needs_nvcc
@pytest.mark.parametrize("rel", sorted(MEMORY_BOUND_KERNELS))
def test_memory_bound_kernels_do_not_spill(rel, compiled):
    """The row and elementwise kernels hold their data in registers under
    tight launch bounds (64 registers at 1024 threads, 32 at two such blocks
    an SM), where a predicated load inside a loop, or loads hoisted next to
    the row, spill: every instantiation compiles for sm_90a without spills
    but the pinned ones above."""
    err, _, log = compiled[ROOT / rel]
    assert err is None, err
    kernels = {n: f for n, f in ptxas_kernels(log).items() if MEMORY_BOUND_KERNELS[rel].search(n)}
    assert len(kernels) >= 20, sorted(kernels)
    bad = []
    for name, fig in kernels.items():
        allowed = max([b for frag, b in MEMORY_BOUND_SPILLS.items() if frag in name], default=0)
        if not (0 <= fig["spill_st"] <= allowed and 0 <= fig["spill_ld"] <= allowed):
            bad.append((name, fig))
    assert not bad, bad


def test_spill_check_reads_a_spill():
    """The check above must be able to fail: a kernel's spill line, as ptxas prints it."""
    log = ("ptxas info    : Compiling entry function '_Z19rlg_regs_kernelIfEvv' for 'sm_90a'\n"
           "ptxas info    : Function properties for _Z19rlg_regs_kernelIfEvv\n"
           "    8 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
           "ptxas info    : Used 64 registers, used 1 barriers, 384 bytes smem\n")
    fig = ptxas_kernels(log)["_Z19rlg_regs_kernelIfEvv"]
    assert (fig["spill_st"], fig["spill_ld"], fig["regs"]) == (8, 12, 64)
    assert MEMORY_BOUND_KERNELS["implementations/residual_layernorm_gelu/cuda/residual_layernorm_gelu.cu"].search(
        "_Z19rlg_regs_kernelIfEvv")


def test_tf32x3_shared_memory_mirrored():
    """TF32X3_SMEM is gemm_tf32x3.cu's SMEM_BYTES (STAGES x (BM x (BK + 4) + BK x (BN + 8)) floats)."""
    from implementations.gemm.cuda import TF32X3_SMEM

    text = (ROOT / "implementations/gemm/cuda/gemm_tf32x3.cu").read_text()
    dims = dict(re.findall(r"\b(BM|BN|BK|STAGES) = (\d+)", text))
    bm, bn, bk, stages = (int(dims[k]) for k in ("BM", "BN", "BK", "STAGES"))
    assert "A_LD = BK + 4, B_LD = BN + 8" in text
    assert TF32X3_SMEM == stages * (bm * (bk + 4) + bk * (bn + 8)) * 4
