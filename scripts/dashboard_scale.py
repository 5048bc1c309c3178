"""The dashboard at scale: 200 runs x 2,000 rows, driven in headless Chromium.

    python scripts/dashboard_scale.py [--folder /tmp/kernel-suite-scale] [--runs 200] [--rows 2000] [--at-once]

Writes (once; an existing folder of as many files is reused) schema-valid
synthetic runs through suite.store (tests/fixtures_dashboard.write_many: two
GPUs, a commit per pair of runs, two timers), serves the dashboard on them the
way ``python -m suite dashboard`` does (dashboard.screenshots.serve), and
reports, in seconds:

  first render   from the server answering /_stcore/health to the Overview's
                 heading and SOL table drawn (the load and the page)
  Overview done  from the same start to the Overview's last chart drawn: in a new
                 session the page draws it in a rerun ui.DEFER_S seconds after the rest
                 reached the browser (dashboard.ui.after_first_render), and the browser
                 loads Plotly's JavaScript for it
  filter change  a sidebar dtype chosen, to the rerun done and the table redrawn
  page change    Overview -> Bandwidth through the sidebar, to its chart drawn (the
                 session's first chart page: Plotly's JavaScript is loaded by then,
                 except with --at-once)
  compare GPUs   Compare switched to "two GPUs", to the rerun done and the table shown
  server RSS     the Streamlit process's resident memory at the end, in MB

and beside each time, in brackets, the seconds the server spent in the
dashboard's script runs it caused (dashboard/app.py, KERNEL_SUITE_DASHBOARD_TIMES):
the rest is the browser drawing and the messages between them.  A folder of a
few rows (--runs 4 --rows 50) shows that rest alone.  Each wait for an element or
for the script's state polls in the page every 20 ms (Playwright's own element
waits poll every 500 ms after their first ~0.3 s).

The changes start once the Overview is done, as for a visitor who reads it for a
few seconds before acting.  With --at-once they start as soon as the first render
is (no "Overview done"), as for a visitor who acts at once: a change before the
Overview's timer fires restarts it, so the page change that follows loads Plotly's
JavaScript itself, and a change made just after it fires waits for that load.

Targets on a 2-core machine: first render <= 3 s, a change <= 1 s, RSS <= 1 GB.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import fixtures_dashboard as fx  # noqa: E402
from dashboard import screenshots as shots  # noqa: E402

IDLE = "() => { const a = document.querySelector('[data-testid=\"stApp\"]');" \
       " return a && a.dataset.testScriptState === 'notRunning'; }"
RUNNING = "() => { const a = document.querySelector('[data-testid=\"stApp\"]');" \
          " return a && a.dataset.testScriptState === 'running'; }"


def build(folder: Path, runs: int, rows: int) -> None:
    if len(list(folder.rglob("*.parquet"))) == runs:
        return
    start = time.monotonic()
    fx.write_many(folder, runs=runs, rows_per_run=rows)
    size = sum(p.stat().st_size for p in folder.rglob("*.parquet")) / 1e6
    print(f"wrote {runs} runs x {rows} rows ({size:.0f} MB) in {time.monotonic() - start:.0f} s", flush=True)


# Playwright's own waits for an element (locator.wait_for) poll from the driver, at 0, 20, 50,
# 100, 100 ms and then every 500 ms: an element that takes more than ~0.3 s to appear is seen
# up to 0.5 s late.  These waits poll in the page every 20 ms, as settle does.
SHOWN = """([css, heading]) => {
    const shown = e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0
                                && getComputedStyle(e).visibility !== 'hidden'; };
    if (heading !== null && ![...document.querySelectorAll('h1, h2, h3, h4, h5, h6, [role="heading"]')]
            .some(h => h.textContent.trim() === heading && shown(h))) return false;
    return css === null || [...document.querySelectorAll(css)].some(shown);
}"""


def shown(page, css: str | None = None, heading: str | None = None) -> None:
    """Wait until an element matching ``css`` (and a heading reading ``heading``) is shown."""
    page.wait_for_function(SHOWN, arg=[css, heading], polling=20)


def drawn(page, title: str) -> None:
    """The page ``title``'s heading shown and what marks it drawn (screenshots.DRAWN, else a
    Plotly chart): screenshots.wait_ready's test, without its wait for the network to idle."""
    shown(page, shots.DRAWN.get(title, shots.CHART), title)


def settle(page, started: bool = False) -> None:
    """Wait for the rerun an action started to finish (it may have finished already)."""
    if not started:
        try:
            page.wait_for_function(RUNNING, timeout=1500, polling=20)
        except Exception:  # noqa: BLE001 - a fast rerun can end before the first poll
            pass
    page.wait_for_function(IDLE, polling=20)


def rss_mb(port: int) -> float:
    """Resident memory of the dashboard server serving ``port`` (found by its command line:
    dashboard/serve.py, which runs Streamlit's)."""
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(w in b" ".join(cmd) for w in (b"streamlit", b"serve.py")) and str(port).encode() in cmd:
            for line in (proc / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    return float("nan")


class ServerTimes:
    """The script runs' seconds the dashboard appends to a file, read since the last call."""

    def __init__(self):
        fd, self.path = tempfile.mkstemp(prefix="dashboard-times-", suffix=".txt")
        os.close(fd)
        self.seen = 0

    def since(self) -> float:
        lines = Path(self.path).read_text().splitlines()
        new, self.seen = lines[self.seen:], len(lines)
        return sum(float(line.split()[-1]) for line in new)


def measure(folder: Path, at_once: bool = False) -> dict[str, tuple[float, float]]:
    """Each measure: (seconds or MB, the server's script seconds in it or nan)."""
    out = {}
    port = shots.free_port()
    times = ServerTimes()
    os.environ["KERNEL_SUITE_DASHBOARD_TIMES"] = times.path  # the server inherits it
    with shots.serve([str(folder)], port=port, timeout=300) as base, shots.browser_page(120_000) as page:
        with urllib.request.urlopen(f"{base}/_stcore/health", timeout=5):
            pass
        start = time.monotonic()
        page.goto(base)
        drawn(page, "Overview")
        settle(page, started=True)
        out["first render"] = (time.monotonic() - start, times.since())
        if not at_once:
            shown(page, shots.LAST["Overview"])
            settle(page, started=True)
            out["Overview done"] = (time.monotonic() - start, out["first render"][1] + times.since())

        sidebar = page.locator('[data-testid="stSidebar"]')
        sidebar.locator('[data-testid="stMultiSelect"]').filter(has_text="dtype").click()
        times.since()
        start = time.monotonic()
        page.get_by_role("option", name="float16", exact=True).click()
        settle(page)
        shown(page, shots.DRAWN["Overview"])
        out["filter change"] = (time.monotonic() - start, times.since())
        page.keyboard.press("Escape")
        times.since()
        start = time.monotonic()
        sidebar.get_by_role("link", name="Bandwidth").click()
        drawn(page, "Bandwidth")
        settle(page, started=True)
        out["page change"] = (time.monotonic() - start, times.since())

        sidebar.get_by_role("link", name="Compare").click()
        drawn(page, "Compare")
        settle(page, started=True)
        times.since()
        start = time.monotonic()
        page.get_by_text("two GPUs", exact=True).click()
        settle(page)
        shown(page, '[data-testid="stDataFrame"]')
        out["compare GPUs"] = (time.monotonic() - start, times.since())
        out["server RSS MB"] = (rss_mb(port), float("nan"))
    os.unlink(times.path)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--folder", type=Path, default=Path("/tmp/kernel-suite-scale"))
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--at-once", action="store_true",
                    help="start the changes as soon as the first render is done, not once the Overview is")
    args = ap.parse_args(argv)
    build(args.folder, args.runs, args.rows)
    for name, (value, server) in measure(args.folder, args.at_once).items():
        print(f"{name:>15}: {value:8.2f}" + (f"  (server {server:.2f})" if server == server else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
