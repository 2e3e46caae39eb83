"""Soak of the local Airflow stack (docs/operations/local-airflow.md): does it stay up for an operator?

Starts ``rebalance-advisor dev airflow start --live`` into a home of its own, with the snapshot DAG
every minute (``REBALANCE_ADVISOR_SNAPSHOT_SCHEDULE``; each snapshot's Asset triggers the advisor),
and for ``--minutes`` keeps:
  - a scripted browser (headless Chromium, as tests/support/browser.py) visiting Airflow's UI pages
    and the advisor's pages, counting every HTTP response the pages' own requests got (Chrome's
    performance log), 5xx apart;
  - an API poller (``/api/v2`` and the advisor's ``/rebalance-advisor/api``) doing the same, and
    sampling Airflow's health report (is the scheduler healthy?) and the load average.
Half-way: ``dev airflow stop`` then ``start`` (timed; runs left in flight are failed by ``start``).
At the end: the snapshot DAG is paused, the runs left queued or running get ``--drain-minutes`` to
end, the stack is stopped. Targets (issue text): the scheduler healthy outside the restart, every
run ends (none failed but those the restart cut), 0 HTTP 5xx.

    .venv/bin/python bench/airflow_soak.py                          # 60 minutes, free ports
    .venv/bin/python bench/airflow_soak.py --minutes 10 --base-port 22200

Prints a table; writes bench/results/airflow_soak.json (ignored by git).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from rebalance_advisor import settings
from rebalance_advisor.devtools import airflow_stack

RESULTS = Path(__file__).resolve().parent / "results" / "airflow_soak.json"
CLI = [sys.executable, "-m", "rebalance_advisor.cli"]
DAGS = airflow_stack.PROJECT_DAGS
#: pages a person keeps open: Airflow's (the React app polls the API under them) and the advisor's
UI_PAGES = ("/", "/dags", "/dags/kafka_rebalance_advisor", "/dags/kafka_offsets_snapshot/runs",
            "/rebalance-advisor/", "/rebalance-advisor/groups/live-orders", "/rebalance-advisor/docs")  # fmt: skip
API_PATHS = ("/api/v2/dags", "/api/v2/dags/kafka_rebalance_advisor/dagRuns?limit=20",
             "/api/v2/dags/kafka_offsets_snapshot/dagRuns?limit=20", "/rebalance-advisor/api/groups",
             "/rebalance-advisor/api/plans", "/api/v2/monitor/health")  # fmt: skip
PAGE_DWELL_S = 6.0  # the React app's own requests and first auto-refresh happen within it
API_INTERVAL_S = 15.0
ENDED = ("success", "failed")


@dataclass
class Tally:
    """HTTP responses by source and status class, shared by the threads; 5xx kept with their URLs."""

    counts: collections.Counter = field(default_factory=collections.Counter)
    server_errors: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, source: str, status: int | None, url: str) -> None:
        kind = "unreachable" if status is None else f"{status // 100}xx"
        with self.lock:
            self.counts[(source, kind)] += 1
            if status is not None and status >= 500:
                self.server_errors.append({"at": time.time(), "source": source, "status": status, "url": url})


@dataclass
class Soak:
    """One soak's stack, ports and what its threads observed."""

    home: Path
    env: dict[str, str]
    ports: list[int]
    tally: Tally = field(default_factory=Tally)
    health: list[dict[str, Any]] = field(default_factory=list)
    events: dict[str, Any] = field(default_factory=dict)
    paused: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.ports[0]}"

    def cli(self, *args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
        return subprocess.run([*CLI, *args], env=self.env, capture_output=True, text=True, timeout=timeout)

    def start(self) -> float:
        api, kafka, worker_log, trigger_log, postgres = (str(p) for p in self.ports)
        began = time.monotonic()
        done = self.cli("dev", "airflow", "start", "--live", "--port", api, "--kafka-port", kafka,
                        "--worker-log-port", worker_log, "--trigger-log-port", trigger_log,
                        "--postgres-port", postgres, "--timeout", "900")  # fmt: skip
        if done.returncode != 0:
            raise SystemExit(f"dev airflow start failed:\n{done.stdout}{done.stderr}")
        self.events.setdefault("marked_failed", []).extend(
            re.findall(r"marked run (\S+) of (\S+) failed", done.stdout)
        )
        self._wait_healthy()
        return time.monotonic() - began

    def _wait_healthy(self, timeout: float = 600.0) -> None:
        deadline = time.monotonic() + timeout
        while self.cli("dev", "airflow", "status", timeout=120).returncode != 0:
            if time.monotonic() > deadline:
                raise SystemExit(f"the stack did not report healthy within {timeout:.0f} s")
            time.sleep(5)

    def api(self) -> airflow_stack.AirflowApi:
        password = airflow_stack.admin_password(airflow_stack.StackPaths(self.home)) or ""
        return airflow_stack.AirflowApi(self.url, airflow_stack.ADMIN_USER, password, timeout=60.0)


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    with contextlib.ExitStack() as stack:
        for s in sockets:
            stack.callback(s.close)
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]


# ---- the scripted browser --------------------------------------------------------------------


def _chromium(profile: Path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--no-first-run", "--window-size=1280,1000",
                f"--user-data-dir={profile}"):  # fmt: skip
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    driver.set_page_load_timeout(60)
    return driver


def _log_in_if_asked(driver, password: str) -> None:
    from selenium.webdriver.common.by import By

    if "/auth/login" not in driver.current_url:
        return
    with contextlib.suppress(Exception):  # the page may still be loading: the next visit tries again
        driver.find_element(By.NAME, "username").send_keys(airflow_stack.ADMIN_USER)
        driver.find_element(By.NAME, "password").send_keys(password)
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        time.sleep(3)


def _count_responses(driver, soak: Soak) -> None:
    """Every response the browser got since the last call (Chrome's performance log)."""
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") != "Network.responseReceived":
            continue
        response = message["params"]["response"]
        if response["url"].startswith(soak.url):
            soak.tally.add("browser", int(response["status"]), response["url"])


def browse(soak: Soak, profile: Path) -> None:
    """Visit the pages in turn until the soak ends; paused while the stack restarts."""
    driver = _chromium(profile)
    try:
        while not soak.done.is_set():
            for path in UI_PAGES:
                if soak.done.is_set() or soak.paused.is_set():
                    break
                try:
                    driver.get(soak.url + path)
                    _log_in_if_asked(
                        driver, airflow_stack.admin_password(airflow_stack.StackPaths(soak.home)) or ""
                    )
                    time.sleep(PAGE_DWELL_S)
                    _count_responses(driver, soak)
                except Exception as error:  # a page that never loaded: counted, the soak goes on
                    soak.tally.add("browser", None, f"{path}: {type(error).__name__}")
            while soak.paused.is_set() and not soak.done.is_set():
                time.sleep(1)
                with contextlib.suppress(Exception):
                    driver.get_log("performance")  # what the restart cut is not counted
    finally:
        driver.quit()


# ---- the API poller ------------------------------------------------------------------------------


def _poll_once(soak: Soak, api: airflow_stack.AirflowApi) -> None:
    for path in API_PATHS:
        try:
            if path.startswith("/api/v2"):
                response = api.request("GET", path.removeprefix("/api/v2"))
            else:  # the advisor's API takes the same token
                headers = {"Authorization": f"Bearer {api.token()}"}
                response = httpx.get(soak.url + path, headers=headers, timeout=60.0)
            soak.tally.add("api", response.status_code, path)
        except (airflow_stack.StackError, httpx.HTTPError):
            soak.tally.add("api", None, path)
    report = airflow_stack.health(soak.url, timeout=15.0) or {}
    scheduler = (report.get("scheduler") or {}).get("status", "no answer")
    soak.health.append({"at": time.time(), "scheduler": scheduler, "load1": os.getloadavg()[0]})


def poll(soak: Soak) -> None:
    """The API and the health report every :data:`API_INTERVAL_S` until the soak ends."""
    api = soak.api()
    try:
        while not soak.done.wait(API_INTERVAL_S):
            if soak.paused.is_set():
                api.close()
                while soak.paused.is_set() and not soak.done.is_set():
                    time.sleep(1)
                api = soak.api()  # a new login after the restart
                continue
            _poll_once(soak, api)
    finally:
        api.close()


# ---- runs ------------------------------------------------------------------------------------------


def all_runs(api: airflow_stack.AirflowApi, dag_id: str) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    while True:
        page = api.json("GET", f"/dags/{dag_id}/dagRuns", params={"limit": 100, "offset": len(runs)})
        runs += page["dag_runs"]
        if not page["dag_runs"] or len(runs) >= page["total_entries"]:
            return runs


def drain(soak: Soak, minutes: float) -> None:
    """Pause the snapshot DAG and give the runs left queued or running ``minutes`` to end."""
    api = soak.api()
    try:
        api.json("PATCH", "/dags/kafka_offsets_snapshot", json={"is_paused": True})
        deadline = time.monotonic() + minutes * 60
        while time.monotonic() < deadline:
            if all(r["state"] in ENDED for d in DAGS for r in all_runs(api, d)):
                break
            time.sleep(10)
        soak.events["runs"] = {d: all_runs(api, d) for d in DAGS}
    finally:
        api.close()


def _seconds(run: dict[str, Any]) -> float | None:
    if not (run.get("start_date") and run.get("end_date")):
        return None
    start, end = (datetime.fromisoformat(run[k].replace("Z", "+00:00")) for k in ("start_date", "end_date"))
    return (end - start).total_seconds()


def run_rows(soak: Soak) -> list[dict[str, Any]]:
    cut = {run_id for run_id, _ in soak.events.get("marked_failed", [])}
    rows = []
    for dag_id, runs in soak.events.get("runs", {}).items():
        states = collections.Counter(r["state"] for r in runs)
        took = sorted(s for r in runs if r["state"] == "success" and (s := _seconds(r)) is not None)
        failed_cut = sum(1 for r in runs if r["state"] == "failed" and r["dag_run_id"] in cut)
        rows.append({"dag": dag_id, "runs": len(runs), "success": states["success"],
                     "failed": states["failed"] - failed_cut, "failed_by_restart": failed_cut,
                     "unfinished": sum(n for s, n in states.items() if s not in ENDED),
                     "median_s": round(statistics.median(took), 1) if took else None,
                     "max_s": round(took[-1], 1) if took else None})  # fmt: skip
    return rows


# ---- the soak ----------------------------------------------------------------------------------------


def soak_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "KAFKA_BOOTSTRAP"))}
    env.pop("REBALANCE_ADVISOR_DB_URL", None)
    env |= {"REBALANCE_ADVISOR_HOME": str(home), "REBALANCE_ADVISOR_CACHE": str(settings.cache_dir()),
            "REBALANCE_ADVISOR_SNAPSHOT_SCHEDULE": "* * * * *"}  # fmt: skip
    return env


def restart(soak: Soak) -> None:
    """Stop and start the stack, the pollers paused meanwhile; the timings in ``events``."""
    soak.paused.set()
    time.sleep(2)
    window_began, began = time.time(), time.monotonic()
    stopped = soak.cli("dev", "airflow", "stop", timeout=300)
    soak.events["stop_s"] = round(time.monotonic() - began, 1)
    soak.events["stop_rc"] = stopped.returncode
    soak.events["restart_start_s"] = round(soak.start(), 1)
    soak.events["restart_window"] = (window_began, time.time())
    soak.paused.clear()


def run_soak(soak: Soak, minutes: float, drain_minutes: float) -> None:
    soak.events["first_start_s"] = round(soak.start(), 1)
    began = time.monotonic()
    soak.events["began"] = time.time()
    threads = [threading.Thread(target=browse, args=(soak, soak.home / "chrome"), daemon=True),
               threading.Thread(target=poll, args=(soak,), daemon=True)]  # fmt: skip
    for thread in threads:
        thread.start()
    time.sleep(minutes * 30)
    soak.events["restart_at_min"] = round((time.monotonic() - began) / 60, 1)
    restart(soak)
    time.sleep(max(0.0, began + minutes * 60 - time.monotonic()))
    soak.done.set()
    for thread in threads:
        thread.join(timeout=120)
    soak.events["soak_min"] = round((time.monotonic() - began) / 60, 1)
    drain(soak, drain_minutes)


def summary(soak: Soak) -> dict[str, Any]:
    window = soak.events.get("restart_window", (0, 0))
    outside = [h for h in soak.health if not window[0] <= h["at"] <= window[1] + 60]
    loads = [h["load1"] for h in soak.health]
    counts = {f"{s}:{k}": n for (s, k), n in sorted(soak.tally.counts.items())}
    timings = {k: soak.events.get(k) for k in ("first_start_s", "restart_at_min", "stop_s", "restart_start_s",
                                              "soak_min")}  # fmt: skip
    return {
        "timings": timings,
        "runs": run_rows(soak),
        "http": counts,
        "http_5xx": len(soak.tally.server_errors),
        "server_errors": soak.tally.server_errors[:50],
        "health_samples": len(soak.health),
        "scheduler_unhealthy_outside_restart": sum(1 for h in outside if h["scheduler"] != "healthy"),
        "load1": {"min": min(loads), "median": statistics.median(loads), "max": max(loads)}
        if loads
        else None,
        "marked_failed_at_start": soak.events.get("marked_failed", []),
    }


def print_table(result: dict[str, Any]) -> None:
    t = result["timings"]
    print(f"\nsoak {t['soak_min']} min; first start {t['first_start_s']} s; stop/start at {t['restart_at_min']} min: "
          f"stop {t['stop_s']} s, start {t['restart_start_s']} s")  # fmt: skip
    print(
        f"{'DAG':28} {'runs':>5} {'ok':>5} {'failed':>7} {'cut':>5} {'unfinished':>11} {'median s':>9} {'max s':>7}"
    )
    for r in result["runs"]:
        print(f"{r['dag']:28} {r['runs']:>5} {r['success']:>5} {r['failed']:>7} {r['failed_by_restart']:>5} "
              f"{r['unfinished']:>11} {r['median_s']!s:>9} {r['max_s']!s:>7}")  # fmt: skip
    print("HTTP responses: " + ", ".join(f"{k} {v}" for k, v in result["http"].items()))
    print(f"HTTP 5xx: {result['http_5xx']}; scheduler unhealthy outside the restart: "
          f"{result['scheduler_unhealthy_outside_restart']} of {result['health_samples']} samples; "
          f"load average (1 min) {result['load1']}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0, help="soak length (default 60)")
    parser.add_argument("--drain-minutes", type=float, default=10.0, help="time the last runs get to end")
    parser.add_argument("--base-port", type=int, default=None, help="ports BASE..BASE+4 (default: free ones)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    home = Path(tempfile.mkdtemp(prefix="ra-airflow-soak-")).resolve()
    ports = list(range(args.base_port, args.base_port + 5)) if args.base_port else _free_ports(5)
    soak = Soak(home, soak_env(home), ports)
    try:
        run_soak(soak, args.minutes, args.drain_minutes)
    finally:
        soak.done.set()
        stopped = soak.cli("dev", "airflow", "stop", timeout=300)
        print(stopped.stdout[-2000:], stopped.stderr[-2000:], sep="")
    result = {"minutes": args.minutes, "ports": ports, **summary(soak)}
    print_table(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str))
    print(f"wrote {args.out}")
    shutil.rmtree(home, ignore_errors=True)
    shutil.rmtree(airflow_stack.StackPaths(home).postgres_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
