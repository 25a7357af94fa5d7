"""Processes of the stack: start in a new session, wait for health, stop by process group.

A process is identified by its PID *and* its start time (psutil), so a PID the kernel
reused for another program after ours died is never signalled.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil

STARTUP_TIMEOUT_S = 240.0
"""Prefect's server takes 10-60 s to start on a loaded 2-core machine; MLflow about 10."""


class StackError(RuntimeError):
    """The stack could not be started (the message says which part and where its log is)."""


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tool(name: str) -> str:
    """The console script of this environment (`prefect`, `mlflow`), beside the interpreter."""
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.exists() else name


def start_process(name: str, cmd: list[str], env: dict[str, str], logs: Path) -> dict[str, Any]:
    """Start `cmd` in a new session (its own process group), output to `logs/<name>.log`."""
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{name}.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    return {
        "pid": proc.pid,
        "pgid": proc.pid,
        "started": psutil.Process(proc.pid).create_time(),
        "cmd": cmd,
        "log": str(log),
    }


def is_ours(entry: dict[str, Any]) -> bool:
    """Whether the recorded process still runs (same PID and same start time)."""
    try:
        proc = psutil.Process(int(entry["pid"]))
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return abs(proc.create_time() - float(entry["started"])) < 1.0
    except (psutil.NoSuchProcess, KeyError, ValueError):
        return False


def wait_http(url: str, entry: dict[str, Any], timeout_s: float = STARTUP_TIMEOUT_S) -> float:
    """Wait until `url` answers 200 (seconds waited); raise if the process died first."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if not is_ours(entry):
            raise StackError(f"{entry['cmd'][0]} exited during start-up; see {entry['log']}")
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return time.monotonic() - start
        except httpx.HTTPError:
            pass
        time.sleep(1.0)
    raise StackError(f"{url} did not answer within {timeout_s:.0f} s; see {entry['log']}")


def wait_for(check: Callable[[], bool], what: str, timeout_s: float) -> None:
    """Poll `check` once a second until true, or raise naming `what`."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if check():
            return
        time.sleep(1.0)
    raise StackError(f"{what} within {timeout_s:.0f} s")


def stop_process(entry: dict[str, Any], grace_s: float = 20.0) -> str:
    """SIGTERM the recorded process group, SIGKILL after `grace_s`; what happened."""
    if not is_ours(entry):
        return "not running"
    pgid = int(entry.get("pgid", entry["pid"]))
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return "not running"
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and is_ours(entry):
        time.sleep(0.5)
    if is_ours(entry):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            return "stopped"
        return "killed"
    return "stopped"
