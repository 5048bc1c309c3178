"""results/ holds only the reference runs named in results/MANIFEST.md, and stays small.

Every Parquet file git tracks under results/ is in the manifest's table and
every file in the table is tracked; together they stay under 3 MB; git
ignores a run of one's own written there but not the listed ones.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
MANIFEST = RESULTS / "MANIFEST.md"
ROW = re.compile(r"^\|\s*`(?P<file>[^`]+)`\s*\|(?P<why>[^|]*)\|")
LIMIT_BYTES = 3_000_000


def manifest() -> dict[str, str]:
    """file (relative to results/) -> why it is kept, from the table's rows."""
    rows = {}
    for line in MANIFEST.read_text(encoding="utf-8").splitlines():
        m = ROW.match(line)
        if m:
            assert m["file"] not in rows, f"{m['file']} is listed twice"
            rows[m["file"]] = m["why"].strip()
    return rows


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)


@pytest.fixture(scope="module")
def tracked() -> list[str]:
    """Files git tracks under results/, relative to it."""
    if shutil.which("git") is None or git("rev-parse", "--is-inside-work-tree").returncode != 0:
        pytest.skip("not a git checkout")
    out = git("ls-files", "-z", "--", "results").stdout
    return [Path(p).relative_to("results").as_posix() for p in out.split("\0") if p]


def test_the_row_pattern_reads_a_table_row():
    m = ROW.match("| `h200/20260101T000000Z-abcdef0.parquet` | CI baseline | `--preset quick` |")
    assert m and m["file"] == "h200/20260101T000000Z-abcdef0.parquet" and m["why"].strip() == "CI baseline"
    assert not ROW.match("| file | why kept | run options |")


def test_every_listed_run_says_why_it_is_kept():
    rows = manifest()
    assert rows, "no file listed in results/MANIFEST.md"
    assert all(why for why in rows.values()), rows
    assert all(re.fullmatch(r"[a-z0-9_-]+/\d{8}T\d{6}Z-[0-9a-f]{7}\.parquet", f) for f in rows), list(rows)


def test_tracked_runs_and_the_manifest_agree(tracked):
    runs = {f for f in tracked if f.endswith(".parquet")}
    listed = set(manifest())
    assert runs - listed == set(), "tracked under results/ but not in MANIFEST.md"
    assert listed - runs == set(), "in MANIFEST.md but not tracked under results/"


def test_results_stay_under_3_mb(tracked):
    size = sum((RESULTS / f).stat().st_size for f in tracked)
    assert size < LIMIT_BYTES, f"results/ tracks {size / 1e6:.2f} MB"


def test_git_ignores_new_runs_but_not_the_listed_ones(tracked):
    for f in manifest():
        assert git("check-ignore", "-q", f"results/{f}").returncode == 1, f"{f} is ignored"
    assert git("check-ignore", "-q", "results/MANIFEST.md").returncode == 1
    for new in ("results/h200/20990101T000000Z-0000000.parquet", "results/b200/20990101T000000Z-0000000.parquet"):
        assert git("check-ignore", "-q", new).returncode == 0, f"{new} is not ignored"
