"""Page times with login on against the same pages without login, side by side, in headless Chromium.

One lake (ui_bench's big lake: many clusters, topics and client instances), served twice at once by
`streamlit run dashboard/app.py`: once with a fleet file without [auth] (no login, loopback), once with
`[auth] required = true` and a real OpenID Connect provider (the tests' npm oidc-provider, `make oidc-provider`),
where the user may view every cluster, so both servers show the same data and the ratio is the cost of login:
the gate before every run, the signed cookie, and the readers filtered and cached per set of visible clusters.

Visits, each timed from navigation until the page's marker is shown and the script has finished, interleaved
between the two servers so both see the same machine load:

- `first`: a new browser context (nothing cached) that holds the login cookie, opening the page: the first view of a
  page in a new session after logging in. Without login: a new context opening the page.
- `reload`: the same page loaded again in that context (a new Streamlit session, the browser's caches warm).
- `login`: (login server only) from the click on the provider's last button until the landing page (Fleet) is
  drawn: the round trip of a login (callback, token exchange, redirect, first render).

Then the CPU time of one script run of each page (AppTest in this process, caches warm), with and without login:
the server's share of a page view, free of the machine's load.

    .venv/bin/python -m benchmarks.auth_pages_bench [--clusters 50] [--topics 20000] [--instances 100000] [--repeats 5]
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

from benchmarks.ui_bench import CHROMIUM, CHROMIUM_ARGS, _free_port, build_big_lake, serve
from tests.rig.oidc import OidcProvider, provider_installed

PAGES = {"fleet": ("", "stDataFrame"), "cluster": ("cluster", "stDataFrame"), "alerts": ("alerts", "stDataFrame"),
         "client_configs": ("client_configs", "stPlotlyChart")}
TARGET_RATIO = 1.15
USER = {"bench": {"email": "bench@example.com", "email_verified": True, "groups": ["sre"]}}


def fleet_text(clusters: int, login: bool) -> str:
    """A fleet file naming the big lake's clusters; with login, group sre may view every one of them."""
    head = ('[auth]\nrequired = true\ndefault_access = { view = ["group:sre"] }\n\n' if login else "")
    return head + "".join(f'[[clusters]]\nname = "cluster-{i:03d}"\nbootstrap_servers = "127.0.0.1:9"\n\n'
                          for i in range(clusters))


def time_page(page: Any, url: str | None, marker: str) -> float:
    """Seconds from navigation (or from now, when url is None) until the marker is shown and the script finished."""
    start = time.perf_counter()
    if url is not None:
        page.goto(url)
    page.locator(f"[data-testid='{marker}'], [data-testid='stException']").first.wait_for(timeout=300_000)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
                           " && !document.querySelector('[data-testid=\"stSkeleton\"]')", timeout=300_000)
    elapsed = time.perf_counter() - start
    if page.query_selector("[data-testid='stException']"):
        raise RuntimeError(f"{page.url} rendered an exception: {page.inner_text('[data-testid=stException]')[:500]}")
    return elapsed


def log_in(page: Any, url: str) -> float:
    """Log in through the provider's forms; seconds from its last click until the landing page is drawn."""
    page.goto(f"{url}/")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_selector("input[name=login]", timeout=60_000)
    page.fill("input[name=login]", "bench")
    page.fill("input[name=password]", "any")
    page.get_by_role("button", name="Sign-in").click()
    page.get_by_role("button", name="Continue").wait_for(timeout=60_000)
    start = time.perf_counter()
    page.get_by_role("button", name="Continue").click()
    page.wait_for_url(lambda u: u.startswith(url), timeout=60_000)
    time_page(page, None, PAGES["fleet"][1])
    return time.perf_counter() - start


def measure(urls: dict[str, str], repeats: int) -> dict[tuple[str, str, str], list[float]]:
    """Interleaved visits: (server, page, visit) -> seconds."""
    from playwright.sync_api import sync_playwright

    seconds: dict[tuple[str, str, str], list[float]] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        # The login cookie every "first" visit starts from, and a warm-up of both servers' caches.
        ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
        log_in(ctx.new_page(), urls["login"])
        cookies = ctx.storage_state()
        ctx.close()
        for label, url in urls.items():
            ctx = browser.new_context(viewport={"width": 1400, "height": 1000},
                                      storage_state=cookies if label == "login" else None)  # type: ignore[arg-type]
            page = ctx.new_page()
            for path, marker in PAGES.values():
                time_page(page, f"{url}/{path}", marker)
            ctx.close()
        for round_no in range(repeats):
            ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
            seconds.setdefault(("login", "fleet", "login"), []).append(log_in(ctx.new_page(), urls["login"]))
            ctx.close()
            # Alternate which server goes first, so neither always follows the other.
            order = list(urls.items()) if round_no % 2 == 0 else list(reversed(urls.items()))
            for name, (path, marker) in PAGES.items():
                for label, url in order:
                    ctx = browser.new_context(viewport={"width": 1400, "height": 1000},
                                              storage_state=cookies if label == "login" else None)  # type: ignore[arg-type]
                    page = ctx.new_page()
                    seconds.setdefault((label, name, "first"), []).append(time_page(page, f"{url}/{path}", marker))
                    seconds.setdefault((label, name, "reload"), []).append(time_page(page, f"{url}/{path}", marker))
                    ctx.close()
        browser.close()
    return seconds


def script_cpu(lake: Path, fleets: dict[str, Path], secrets: dict[str, Any], repeats: int) -> dict[str, float]:
    """CPU seconds of one script run of each page in this process (AppTest), with and without login, caches warm.

    The browser timings above carry the machine's load; CPU time of the server's script run does not, and it is
    where login adds work (the gate, the filtered and separately cached readers).
    """
    from streamlit.testing.v1 import AppTest

    app_file = str(Path(__file__).resolve().parent.parent / "dashboard" / "app.py")
    user = {"is_logged_in": True, "sub": "bench", "iat": int(time.time()), **USER["bench"]}
    out: dict[str, float] = {}
    os.environ["FLEETVIEW_LAKE"] = str(lake)
    for name in PAGES:
        for label, fleet in fleets.items():
            os.environ["FLEETVIEW_FLEET"] = str(fleet)
            app = AppTest.from_file(app_file, default_timeout=300)
            if label == "login":
                app.secrets.update(secrets)
                app.user = dict(user)
            app.run()
            if name != "fleet":
                app.switch_page(f"../pages/{name}.py")
            app.run()  # warm
            if app.exception:
                raise RuntimeError(f"{name} ({label}) raised: {app.exception[0].value}")
            spent = []
            for _ in range(repeats):
                began = time.process_time()
                app.run()
                spent.append(time.process_time() - began)
            out[f"{label}_{name}_cpu_s"] = round(statistics.median(spent), 4)
    return out


def main(argv: list[str] | None = None) -> int:
    """Build the lake, serve it with and without login, time the pages, print one JSON document."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=50)
    parser.add_argument("--topics", type=int, default=20_000)
    parser.add_argument("--instances", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5, help="visits per page, server and kind (median reported)")
    args = parser.parse_args(argv)
    if not provider_installed():
        print("oidc-provider is not installed: run `make oidc-provider`", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="auth-pages-") as tmp:
        work = Path(tmp)
        lake = work / "lake"
        started = time.perf_counter()
        build_big_lake(lake, args.clusters, args.topics, args.instances)
        built_s = time.perf_counter() - started
        port = _free_port()
        login_url = f"http://localhost:{port}"
        idp = OidcProvider(work / "idp", USER, [f"{login_url}/oauth2callback"])
        idp.start()
        procs: dict[str, subprocess.Popen[bytes]] = {}
        try:
            for label in ("open", "login"):
                (work / f"{label}.toml").write_text(fleet_text(args.clusters, label == "login"), encoding="utf-8")
            (work / "secrets.toml").write_text(idp.secrets_toml("bench-cookie-secret-0123456789abcdef"),
                                               encoding="utf-8")
            procs["open"], open_url = serve(lake, work / "open.log", env={"FLEETVIEW_FLEET": str(work / "open.toml")})
            procs["login"], _ = serve(lake, work / "login.log", port=port,
                                      env={"FLEETVIEW_FLEET": str(work / "login.toml")},
                                      args=["--secrets.files", str(work / "secrets.toml")])
            seconds = measure({"open": open_url, "login": login_url}, args.repeats)
            auth = {"auth": {"redirect_uri": f"{login_url}/oauth2callback", "cookie_secret": "x" * 32,
                             "client_id": "fleetview", "client_secret": "s", "server_metadata_url": idp.metadata_url}}
            cpu = script_cpu(lake, {"open": work / "open.toml", "login": work / "login.toml"}, auth,
                             max(5, args.repeats))
        finally:
            for proc in procs.values():
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=30)
            idp.stop()
    medians = {f"{label}_{page}_{visit}_s": round(statistics.median(v), 3)
               for (label, page, visit), v in sorted(seconds.items())}
    ratios = {f"{page}_{visit}": round(medians[f"login_{page}_{visit}_s"] / medians[f"open_{page}_{visit}_s"], 2)
              for page in PAGES for visit in ("first", "reload")}
    ratios["login_round_trip_vs_open_fleet_first"] = round(
        medians["login_fleet_login_s"] / medians["open_fleet_first_s"], 2)
    cpu_ratios = {page: round(cpu[f"login_{page}_cpu_s"] / cpu[f"open_{page}_cpu_s"], 2) for page in PAGES}
    out = {"args": vars(args), "lake_built_s": round(built_s, 1), "medians": medians,
           "ratios_login_over_open": ratios, "script_cpu": cpu, "script_cpu_ratios_login_over_open": cpu_ratios,
           "load_average": os.getloadavg(),
           "target": f"first and reload with login <= {TARGET_RATIO}x without",
           "target_met": all(v <= TARGET_RATIO for k, v in ratios.items() if not k.startswith("login_"))}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
