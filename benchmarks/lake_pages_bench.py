"""Page times over lake age: Fleet, Cluster, Alerts and Compare in headless Chromium on lakes kept at checkpoints.

`benchmarks/lake_time_bench.py --keep-lakes DIR` keeps the simulated lake at 1 hour, 1 day, 7 days and
30 days as DIR/<label>. This serves every kept lake with its own `streamlit run` at once and visits each
page on each lake in turn (interleaved, so all lakes see the same machine load): one cold visit, then
warm ones, each in a fresh browser context (a new Streamlit session, nothing cached in the browser). It
samples each server's peak RSS, and times a floor app (a title and one table) the same way: what any
Streamlit page costs here. Two more visit kinds show what an SRE at the dashboard waits for:

- `reload`: a full page load (a new Streamlit session) in a browser that has been there before, so its
  HTTP and script caches hold Streamlit's JavaScript, as a bookmark or a reload in one's own browser;
- `switch`: a click on the page's link in the sidebar of an open session (st.navigation), timed until
  the new page's title and table are shown, no element is stale and the script has finished.

    .venv/bin/python -m benchmarks.lake_pages_bench DIR [--repeats 3]

`lake_time_bench --pages` runs this on the lakes it kept and puts the figures in its JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.ui_bench import CHROMIUM, CHROMIUM_ARGS, RssSampler, serve

PAGES = {"fleet": ("", "stDataFrame"), "cluster": ("cluster", "stDataFrame"), "alerts": ("alerts", "stDataFrame"),
         "compare": ("compare", "stDataFrame")}
TITLES = {"fleet": "Fleet", "cluster": "Cluster", "alerts": "Alerts", "compare": "Compare clusters"}
VISITS = ("cold", "warm", "reload", "switch")
# Streamlit's own cost of a page view, timed the same way: a title and one 50-row table, nothing else.
FLOOR_APP = """import pandas as pd
import streamlit as st
st.title("Floor")
st.dataframe(pd.DataFrame({"a": range(50), "b": ["x"] * 50}))
"""
TARGET_RATIO = 1.3
TARGET_PAGE_S = 2.0


def time_page(page: Any, url: str, marker: str) -> float:
    """Seconds from navigation until the marker is shown and the script finished; fails at once on an exception."""
    start = time.perf_counter()
    page.goto(url)
    page.locator(f"[data-testid='{marker}'], [data-testid='stException']").first.wait_for(timeout=120_000)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
                           " && !document.querySelector('[data-testid=\"stSkeleton\"]')", timeout=120_000)
    elapsed = time.perf_counter() - start
    if page.query_selector("[data-testid='stException']"):
        raise RuntimeError(f"{url} rendered an exception: {page.inner_text('[data-testid=stException]')[:500]}")
    return elapsed


def switch_page(page: Any, path: str, title: str) -> float:
    """Seconds from a click on the sidebar link to `path` until that page has replaced the previous one."""
    start = time.perf_counter()
    page.locator(f"[data-testid='stSidebarNavLink'][href$='/{path}']").first.click()
    page.wait_for_function(
        "t => { const h = document.querySelector('h1');"
        " return h && h.innerText.trim().startsWith(t)"
        " && !document.querySelector('[data-testid=\"stStatusWidget\"]')"
        " && !document.querySelector('[data-testid=\"stSkeleton\"]')"
        " && !document.querySelector('[data-testid=\"stElementContainer\"][data-stale=\"true\"]')"
        " && !!document.querySelector('[data-testid=\"stDataFrame\"]') }", arg=title, timeout=120_000)
    elapsed = time.perf_counter() - start
    if page.query_selector("[data-testid='stException']"):
        raise RuntimeError(f"/{path} rendered an exception: {page.inner_text('[data-testid=stException]')[:500]}")
    return elapsed


def measure_pages(lakes: dict[str, Path], repeats: int = 3) -> dict[str, Any]:
    """Median cold and warm page seconds and peak server RSS per lake label; ratios against the first label."""
    from playwright.sync_api import sync_playwright

    procs: dict[str, subprocess.Popen[bytes]] = {}
    urls: dict[str, str] = {}
    samplers: dict[str, RssSampler] = {}
    seconds: dict[tuple[str, str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="lake-pages-") as tmp:
        try:
            for label, lake in lakes.items():
                procs[label], urls[label] = serve(lake, Path(tmp) / f"streamlit-{label}.log")
                samplers[label] = RssSampler(procs[label].pid)
                samplers[label].start()
            floor_app = Path(tmp) / "floor.py"
            floor_app.write_text(FLOOR_APP, encoding="utf-8")
            procs["floor"], floor_url = serve(Path(tmp), Path(tmp) / "streamlit-floor.log", app=floor_app)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
                for round_no in range(1 + repeats):
                    visit = "cold" if round_no == 0 else "warm"
                    context = browser.new_context(viewport={"width": 1400, "height": 1000})
                    seconds.setdefault(("floor", "floor", visit), []).append(
                        time_page(context.new_page(), floor_url, "stDataFrame"))
                    context.close()
                    for page_name, (path, marker) in PAGES.items():
                        for label, url in urls.items():
                            context = browser.new_context(viewport={"width": 1400, "height": 1000})
                            page = context.new_page()
                            spent = time_page(page, f"{url}/{path}", marker)
                            seconds.setdefault((label, page_name, visit), []).append(spent)
                            context.close()
                # One browser per lake that keeps its caches: full reloads, then sidebar switches.
                for label, url in urls.items():
                    context = browser.new_context(viewport={"width": 1400, "height": 1000})
                    page = context.new_page()
                    time_page(page, f"{url}/", "stDataFrame")  # the first visit fills the browser's caches
                    for _ in range(repeats):
                        for page_name, (path, marker) in PAGES.items():
                            seconds.setdefault((label, page_name, "reload"), []).append(
                                time_page(page, f"{url}/{path}", marker))
                    for _ in range(repeats):
                        for page_name in ("cluster", "compare", "alerts", "fleet"):
                            seconds.setdefault((label, page_name, "switch"), []).append(
                                switch_page(page, PAGES[page_name][0], TITLES[page_name]))
                    context.close()
                browser.close()
        finally:
            for label, proc in procs.items():
                if label in samplers:
                    samplers[label].running = False
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=30)
    first = next(iter(lakes))
    out: dict[str, Any] = {"pages": {}, "server_peak_rss_mb": {}, "ratios_vs_" + first: {}}
    out["streamlit_floor_s"] = {f"{visit}": round(statistics.median(seconds[("floor", "floor", visit)]), 3)
                                for visit in ("cold", "warm")}
    for label in lakes:
        out["pages"][label] = {f"{page}_{visit}_s": round(statistics.median(seconds[(label, page, visit)]), 3)
                               for page in PAGES for visit in VISITS}
        out["server_peak_rss_mb"][label] = round(samplers[label].peak / 2**20, 1)
    for label in lakes:
        ratios = {key: round(value / out["pages"][first][key], 2) for key, value in out["pages"][label].items()}
        ratios["server_peak_rss"] = round(out["server_peak_rss_mb"][label] / out["server_peak_rss_mb"][first], 2)
        out["ratios_vs_" + first][label] = ratios
    last = list(lakes)[-1]
    out["targets"] = {
        f"every page and RSS at {last} <= {TARGET_RATIO}x {first}":
            all(v <= TARGET_RATIO for v in out["ratios_vs_" + first][last].values()),
        f"every page under {TARGET_PAGE_S} s": all(v < TARGET_PAGE_S for p in out["pages"].values() for v in p.values()),
        f"every page under {TARGET_PAGE_S} s in a browser that has been there (reload, switch)":
            all(v < TARGET_PAGE_S for p in out["pages"].values() for k, v in p.items() if "_reload" in k or "_switch" in k),
    }
    return out


def main(argv: list[str] | None = None) -> int:
    """Measure the pages on every lake kept under DIR (in checkpoint order) and print one JSON document."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kept", type=Path, help="the --keep-lakes directory of lake_time_bench")
    parser.add_argument("--repeats", type=int, default=3, help="warm visits per page and lake (median reported)")
    args = parser.parse_args(argv)
    order = ["1h", "1d", "7d", "30d"]
    lakes = {label: args.kept / label for label in order if (args.kept / label).is_dir()}
    lakes.update({p.name: p for p in sorted(args.kept.iterdir()) if p.is_dir() and p.name not in lakes})
    if not lakes:
        print(f"no kept lakes under {args.kept}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print(json.dumps(measure_pages(lakes, args.repeats), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
