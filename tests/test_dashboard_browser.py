"""The dashboard in a real browser: headless Debian Chromium through playwright.

Starts the server the way `python -m suite dashboard` does (dashboard.launch,
via dashboard.screenshots.serve), opens every page, checks its heading, what
marks it drawn (a Plotly chart; the Overview's SOL table, drawn before Plotly's
JavaScript is requested) and no Streamlit exception, checks that a sidebar filter
change reaches the URL and survives a page change, and saves screenshots under
tests/artifacts/dashboard/.
"""
import os
import time
from pathlib import Path

import pytest

pytest.importorskip("streamlit", reason="the dashboard needs streamlit (scripts/setup.sh dev)")
pytest.importorskip("plotly", reason="the dashboard needs plotly (scripts/setup.sh dev)")

import fixtures_dashboard as fx  # noqa: E402
from dashboard import screenshots as shots  # noqa: E402

pytestmark = pytest.mark.browser
ARTIFACTS = Path(__file__).resolve().parent / "artifacts" / "dashboard"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not os.path.exists(shots.CHROMIUM):
        pytest.skip(f"no chromium at {shots.CHROMIUM} (scripts/setup.sh dev installs it)")
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed (scripts/setup.sh dev)")
    tree = fx.write_fixture_tree(tmp_path_factory.mktemp("browser"))
    with shots.serve([tree["results"], tree["corrupt"]]) as base:
        yield base, tree


@pytest.fixture(scope="module")
def page(server):
    with shots.browser_page() as pg:
        yield pg


def no_exception(page) -> bool:
    return page.locator('[data-testid="stException"]').count() == 0


@pytest.mark.parametrize("path,title", shots.PAGES)
def test_every_page_renders(server, page, path, title):
    base, tree = server
    page.goto(f"{base}/{path}")
    shots.wait_ready(page, title)
    assert no_exception(page)
    # the corrupt file is named, the rest is shown
    assert page.get_by_text(str(tree["corrupt"])).count() >= 1
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{path or 'overview'}.png"), full_page=True)


def test_the_overview_loads_plotly_after_its_first_render(server, fresh_page):
    """The Overview's SOL table is drawn before the browser requests Plotly's bundle
    (Streamlit loads it with the first Plotly chart); the Overview's last chart then
    requests it without any action, so the Bandwidth page requests it no more."""
    base, _ = server
    page = fresh_page
    # when the SOL table's canvas appeared, in the page's clock (performance.now())
    page.add_init_script("""new MutationObserver((_, obs) => {
        if (document.querySelector('.st-key-overview_sol [data-testid="data-grid-canvas"]')) {
            window.__solDrawn = performance.now(); obs.disconnect(); } })
        .observe(document, {childList: true, subtree: true});""")
    scripts = []
    page.on("request", lambda r: scripts.append(r.url) if r.resource_type == "script" else None)
    page.goto(base)
    shots.wait_ready(page, "Overview")
    page.locator(shots.LAST["Overview"]).first.wait_for(timeout=30_000)
    plotly = [u for u in scripts if "plotly" in u.lower()]
    assert len(plotly) == 1
    started = page.evaluate("""() => performance.getEntriesByType('resource')
        .filter(e => e.initiatorType === 'script' && /plotly/i.test(e.name)).map(e => e.startTime)""")
    assert len(started) == 1 and started[0] > page.evaluate("window.__solDrawn")
    page.locator('[data-testid="stSidebar"]').get_by_role("link", name="Bandwidth").click()
    shots.wait_ready(page, "Bandwidth")
    assert [u for u in scripts if "plotly" in u.lower()] == plotly


def test_a_click_on_a_sol_cell_opens_its_case(server, fresh_page):
    """A real click on the Overview's SOL table (Streamlit's cell selection) lands on
    the Case view with that workload's largest shape in the URL."""
    base, _ = server
    page = fresh_page
    page.goto(f"{base}/?gpu=h200&overview_dtype=float32")
    shots.wait_ready(page, "Overview")
    grid = page.locator('.st-key-overview_sol [data-testid="stDataFrame"]')
    grid.scroll_into_view_if_needed()
    # the grid is a canvas: its last column (softmax, the workloads sorted) ends at the
    # table's right edge (width="content"); under the 35-px header, the first row
    box = grid.bounding_box()
    page.mouse.click(box["x"] + box["width"] - 15, box["y"] + 35 + 17)
    page.wait_for_url("**/case?**case_shape=**")
    shots.wait_ready(page, "Case")
    assert "case_workload=softmax" in page.url and "case_gpu=h200" in page.url
    assert "case_dtype=float32" in page.url and "case_shape=M%3D4096%2CN%3D131072" in page.url
    page.locator('[data-testid="stDataFrame"]').first.wait_for()
    assert no_exception(page)


def test_filter_change_reaches_the_url_and_survives_navigation(server, page):
    base, _ = server
    page.goto(f"{base}/bandwidth")
    shots.wait_ready(page, "Bandwidth")
    sidebar = page.locator('[data-testid="stSidebar"]')
    sidebar.locator('[data-testid="stMultiSelect"]').filter(has_text="dtype").click()
    page.get_by_role("option", name="float16", exact=True).click()
    page.wait_for_url("**dtype=float16**")
    page.keyboard.press("Escape")
    sidebar.get_by_role("link", name="Roofline").click()
    shots.wait_ready(page, "Roofline")
    page.wait_for_url("**/roofline?**dtype=float16**")
    assert no_exception(page)


def test_a_shared_link_restores_the_filters(server, page):
    base, _ = server
    page.goto(f"{base}/bandwidth?gpu=h200&dtype=float32")
    shots.wait_ready(page, "Bandwidth")
    gpu = page.locator('[data-testid="stSidebar"] [data-testid="stMultiSelect"]').filter(has_text="GPU")
    assert "h200" in gpu.inner_text()
    # with both GPUs the legend would name the H100's series
    assert "h100" not in page.locator(".js-plotly-plot").first.inner_text()
    assert "gpu=h200" in page.url


@pytest.fixture
def fresh_page(page):
    """A tab of its own: no session or listener shared with the other tests."""
    pg = page.context.browser.new_page(viewport={"width": 1400, "height": 1000})
    pg.set_default_timeout(60_000)
    yield pg
    pg.close()


def test_a_hostile_link_renders_fast_and_inert(server, fresh_page):
    """Markdown links and images, tags and a 60 KB value in the URL: named as text,
    clipped, no <a>/<img> made of them, nothing fetched, the page up in seconds.
    (Tornado answers "Invalid HTTP request" once the request line and cookies pass
    its 64 KiB header limit; AppTest covers a 100 KB value.)"""
    base, _ = server
    page = fresh_page
    beacon = "http://127.0.0.1:9/beacon"
    fetched = []
    page.on("request", lambda r: fetched.append(r.url) if r.url.startswith(beacon) else None)
    page.goto(base)  # a warm server: the time below is the link's, not the first import's
    shots.wait_ready(page, "Overview")
    query = (f"workload=[Open the fixed results]({beacon}/link)&gpu=![x]({beacon}/md.png)"
             f"&impl=<img src='{beacon}/tag.png'>&dtype=<script>alert(1)</script>&commit={'A' * 60_000}")
    start = time.monotonic()
    page.goto(f"{base}/?{query}")
    shots.wait_ready(page, "Overview")
    page.get_by_text("Ignored from the link", exact=False).wait_for()
    note = page.locator('[data-testid="stSidebar"] [data-testid="stText"]').first
    elapsed = time.monotonic() - start
    text = note.inner_text()
    assert "[Open the fixed results]" in text and "A" * 60 in text and "A" * 100 not in text
    assert page.locator(f'a[href^="{beacon}"], img[src^="{beacon}"]').count() == 0
    assert page.locator("script:has-text('alert(1)')").count() == 0
    assert not fetched, fetched
    assert elapsed < 8, f"{elapsed:.1f} s to render"


def test_a_click_on_a_chart_point_opens_its_case(server, fresh_page):
    """A real click on a Bandwidth point (Plotly's hit test, Streamlit's selection event)
    lands on the Case view with the point's case in the URL and its table drawn."""
    base, _ = server
    page = fresh_page
    page.goto(f"{base}/bandwidth?gpu=h200&bw_workload=softmax")
    shots.wait_ready(page, "Bandwidth")
    point = page.locator(".js-plotly-plot .scatterlayer path.point").last
    box = point.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_url("**/case?**case_shape=**")
    shots.wait_ready(page, "Case")
    assert "case_workload=softmax" in page.url and "gpu=h200" in page.url and "bw_" not in page.url
    page.locator('[data-testid="stDataFrame"]').first.wait_for()
    assert no_exception(page)


def test_screenshots_show_the_newest_run_with_nsight_compute_figures():
    """Without --query profile=..., the Profile screenshot names the newest committed
    run whose rows hold ncu figures; a folder without any gives None."""
    import pandas as pd

    from suite import store

    root = Path(__file__).resolve().parents[1]
    run = shots.newest_profiled_run([str(root / "results")])
    df, _ = store.read_runs([str(p) for p in sorted((root / "results").rglob("*.parquet"))])
    profiled = df[df["ncu_ms"].notna()]
    assert run is not None and run in set(profiled["run_id"])
    newest = pd.to_datetime(profiled["timestamp"]).max()
    assert (pd.to_datetime(profiled.loc[profiled["run_id"] == run, "timestamp"]) == newest).any()
    assert shots.newest_profiled_run([str(root / "docs")]) is None
