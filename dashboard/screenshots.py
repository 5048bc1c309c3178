"""Screenshots of every page in headless Chromium, for docs/ and the browser test.

    python -m dashboard.screenshots results/ --out docs/screenshots

(the README's: the committed runs).  Profile shows the newest run that holds
Nsight Compute figures, unless ``--query profile=run=RUN_ID`` names another:
the newest runs may hold none.

Starts the dashboard the way ``python -m suite dashboard`` does, on a free
localhost port, and drives the system's Chromium through playwright (no
browser download).  Needs scripts/setup.sh dev.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--disable-background-networking", "--disable-component-update", "--no-first-run"]
PAGES = [("", "Overview"), ("case", "Case"), ("bandwidth", "Bandwidth"), ("roofline", "Roofline"), ("fusion", "Fusion"),
         ("profile", "Profile"), ("compare", "Compare"), ("history", "History"), ("data", "Data")]
CHART = ".js-plotly-plot .main-svg"
# what shows a page drawn, by its title: a Plotly chart's SVG, but the Overview's SOL
# table (the default page draws no Plotly chart, so its first render loads no Plotly
# JavaScript), and Profile's chart or, where the runs hold none of its figures
# (Nsight Compute, energy), the command that records them
DRAWN = {"Overview": '.st-key-overview_sol [data-testid="data-grid-canvas"]',
         "Profile": f'{CHART}, [data-testid="stCode"]'}
# what a page draws after the rest (dashboard.ui.after_first_render), by its title: the
# Overview's last chart, which in a new session comes ui.DEFER_S seconds after its first render
LAST = {"Overview": f".st-key-overview_speedup {CHART}"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(paths: list[str], port: int | None = None, timeout: float = 60.0):
    """Run the dashboard server on 127.0.0.1; yields its base URL, stops it after."""
    from dashboard import launch

    port = port or free_port()
    cmd, env = launch.command(SimpleNamespace(paths=[str(p) for p in paths], port=port,
                                              address="127.0.0.1", headless=True))
    log = tempfile.NamedTemporaryFile(prefix="dashboard-", suffix=".log", delete=False)
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the dashboard server did not start:\n"
                                   + Path(log.name).read_text(errors="replace")[-3000:])
            time.sleep(0.3)
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server we started, and only it
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
        os.unlink(log.name)


@contextlib.contextmanager
def browser_page(timeout_ms: int = 60_000):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(timeout_ms)
            yield page
        finally:
            browser.close()


def wait_ready(page, title: str, drawn: bool = True, last: bool = False) -> None:
    """The page's heading is shown and, if asked, what marks it drawn (DRAWN) and what it
    draws after that (LAST)."""
    page.get_by_role("heading", name=title, exact=True).wait_for()
    if drawn:
        page.locator(DRAWN.get(title, CHART)).first.wait_for()
    if last and title in LAST:
        page.locator(LAST[title]).first.wait_for()
    page.wait_for_load_state("networkidle")


def fit_height(page, width: int = 1400, least: int = 1000, most: int = 4000) -> None:
    """Grow the viewport to the page's content: Streamlit scrolls inside its main
    section, so a full-page screenshot of the window would stop at the first screen."""
    height = page.evaluate("""() => {
        const main = document.querySelector('[data-testid="stMain"]');
        return main ? main.scrollHeight : document.documentElement.scrollHeight; }""")
    page.set_viewport_size({"width": width, "height": max(least, min(most, int(height)))})
    page.wait_for_timeout(500)  # Plotly redraws on resize
    page.wait_for_load_state("networkidle")


def newest_profiled_run(paths: list[str]) -> str | None:
    """The run_id of the newest run under ``paths`` with Nsight Compute figures, or None."""
    from suite import store

    files = [str(f) for p in paths for f in (sorted(Path(p).rglob("*.parquet")) if Path(p).is_dir() else [p])]
    df, _ = store.read_runs(files)
    if df.empty or "ncu_ms" not in df:
        return None
    df = df[df["ncu_ms"].notna()]
    return None if df.empty else str(df.sort_values("timestamp")["run_id"].iloc[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dashboard.screenshots", description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="*", default=["results"])
    ap.add_argument("--out", default="docs/screenshots")
    ap.add_argument("--query", action="append", default=[], metavar="PAGE=QUERY",
                    help="a URL query string for one page (overview, case, ...), e.g. profile=run=RUN_ID")
    args = ap.parse_args(argv)
    queries = dict(q.split("=", 1) for q in args.query)
    if "profile" not in queries:
        run = newest_profiled_run(args.paths)
        if run:
            queries["profile"] = f"run={run}"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with serve(args.paths) as base, browser_page() as page:
        for path, title in PAGES:
            query = queries.get(path or "overview")
            page.goto(f"{base}/{path}" + (f"?{query}" if query else ""))
            page.set_viewport_size({"width": 1400, "height": 1000})
            wait_ready(page, title, last=True)
            fit_height(page)
            target = out / f"{path or 'overview'}.png"
            page.screenshot(path=str(target), full_page=True)
            print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
