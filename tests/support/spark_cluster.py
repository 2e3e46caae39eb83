"""A real Spark standalone cluster (one master, one worker) from the pip-installed Spark.

Both daemons run through ``pyspark/bin/spark-class`` in process groups of their own, bound to
127.0.0.1, and are stopped by killing those groups, so no JVM outlives the context.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from rebalance_advisor.devtools.local_kafka import free_port


def spark_home() -> Path:
    """The Spark that pip installed with pyspark (it carries the jars and ``bin/spark-class``)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def cluster_env() -> dict[str, str]:
    """Environment for the daemons: loopback only, the venv's python for Python workers."""
    bin_dir = str(Path(sys.executable).parent)
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(spark_home()),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_HOSTNAME="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        PATH=bin_dir + os.pathsep + env.get("PATH", ""),
    )
    # A stray SPARK_CONF_DIR or master URL from the caller's shell must not leak into the daemons.
    for key in ("SPARK_CONF_DIR", "MASTER", "SPARK_MASTER_HOST"):
        env.pop(key, None)
    return env


@dataclass
class SparkCluster:
    """A running master and worker: their URLs, processes and log files."""

    master_url: str
    web_url: str
    master: subprocess.Popen
    worker: subprocess.Popen
    log_dir: Path

    def status(self) -> dict:
        """The master's JSON status (``/json/``): workers, cores, running applications."""
        with urllib.request.urlopen(self.web_url + "/json/", timeout=5) as response:
            return json.load(response)

    def logs(self) -> str:
        """Both daemons' output, for failure messages."""
        return "\n".join(
            f"--- {path.name} ---\n{path.read_text(errors='replace')[-4000:]}"
            for path in sorted(self.log_dir.glob("*.log"))
        )

    def stop(self) -> None:
        """Kill both process groups (worker first); raise if a process of theirs still runs."""
        for process in (self.worker, self.master):
            _kill_group(process)
        deadline = time.monotonic() + 10
        while (left := live_processes({self.worker.pid, self.master.pid})) and time.monotonic() < deadline:
            time.sleep(0.2)
        if left:
            raise RuntimeError(f"Spark processes survived stop(): {left}")


def live_processes(groups: set[int]) -> list[int]:
    """PIDs of running (not zombie) processes in the given process groups, from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        state, pgrp = fields[0], int(fields[2])
        if pgrp in groups and state != "Z":
            found.append(int(stat.parent.name))
    return found


def _kill_group(process: subprocess.Popen, grace: float = 10.0) -> None:
    if process.poll() is not None:
        _signal_group(process.pid, signal.SIGKILL)  # children of a dead leader may still run
        return
    # SIGTERM to the JVM only: its shutdown hooks stop (and reap) the executors it launched;
    # SIGKILL to the whole group afterwards catches whatever is left.
    with suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        _signal_group(process.pid, signal.SIGKILL)
        process.wait(timeout=grace)
    _signal_group(process.pid, signal.SIGKILL)


def _signal_group(pgid: int, sig: int) -> None:
    with suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def _spawn(args: list[str], log_path: Path, env: dict[str, str], cwd: Path) -> subprocess.Popen:
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            start_new_session=True,  # own process group: stop() kills the JVM and its children
        )


def start(work_dir: Path, cores: int = 1, memory: str = "1g", timeout: float = 90.0) -> SparkCluster:
    """Start a master and one worker under ``work_dir``; return once the worker has registered."""
    work_dir.mkdir(parents=True, exist_ok=True)
    log_dir = work_dir / "logs"
    log_dir.mkdir(exist_ok=True)
    env = cluster_env()
    port, web_port, worker_web_port = free_port(), free_port(), free_port()
    master_url = f"spark://127.0.0.1:{port}"
    web_url = f"http://127.0.0.1:{web_port}"
    master = _spawn(
        ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port)]
        + ["--webui-port", str(web_port)],
        log_dir / "master.log",
        env,
        work_dir,
    )
    worker: subprocess.Popen | None = None
    try:
        worker = _spawn(
            ["org.apache.spark.deploy.worker.Worker", master_url, "--host", "127.0.0.1"]
            + ["--cores", str(cores), "--memory", memory, "--webui-port", str(worker_web_port)]
            + ["--work-dir", str(work_dir / "work")],
            log_dir / "worker.log",
            env,
            work_dir,
        )
        cluster = SparkCluster(master_url, web_url, master, worker, log_dir)
        _wait_for_worker(cluster, timeout)
        return cluster
    except BaseException:
        if worker is not None:
            _kill_group(worker)
        _kill_group(master)
        raise


def _wait_for_worker(cluster: SparkCluster, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, process in (("master", cluster.master), ("worker", cluster.worker)):
            if process.poll() is not None:
                raise RuntimeError(f"Spark {name} exited with {process.returncode}\n{cluster.logs()}")
        try:
            if cluster.status().get("aliveworkers", 0) >= 1:
                return
        except (OSError, ValueError):
            pass  # web UI not up yet, or answering with a half-started page
        time.sleep(0.5)
    raise TimeoutError(
        f"no Spark worker registered with {cluster.master_url} in {timeout:.0f}s\n{cluster.logs()}"
    )


@contextmanager
def spark_cluster(work_dir: Path, **kwargs) -> Iterator[SparkCluster]:
    """Context manager around :func:`start`; both daemons are stopped on exit."""
    cluster = start(work_dir, **kwargs)
    try:
        yield cluster
    finally:
        cluster.stop()
