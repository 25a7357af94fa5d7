"""Processes of the stack: start in a new session, wait for health, stop by process group.

A process is identified by its PID *and* its command line (the one recorded at start),
so a PID the kernel reused for another program after ours died is never signalled. The
start time is recorded too but not relied on: it is derived from the wall clock at boot,
and a clock that steps (NTP on a VM) moves it by seconds; a stop must never lose track
of what it started. A stop signals the whole process group (the servers' workers and
children too), also after its leader died, as long as no unrelated process took the
leader's PID.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import suppress
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
    _until_it_shows(proc, cmd)
    return {
        "pid": proc.pid,
        "pgid": proc.pid,
        "started": psutil.Process(proc.pid).create_time(),
        "cmd": cmd,
        "log": str(log),
    }


def _until_it_shows(proc: subprocess.Popen[bytes], cmd: list[str], wait_s: float = 5.0) -> None:
    """Wait (bounded) until the new process shows `cmd` as its command line.

    Right after the exec the kernel may still report an empty command line; a record
    taken then could not be recognised (`is_ours`) until it was, seen under a loaded
    machine in the stepped-clock test.
    """
    deadline = time.monotonic() + wait_s
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if _same_command(psutil.Process(proc.pid), cmd):
                return
        except psutil.Error:
            return
        time.sleep(0.01)


def _same_command(proc: psutil.Process, cmd: list[str]) -> bool:
    """Whether `proc` runs `cmd` (a console script shows its interpreter first)."""
    line = proc.cmdline()
    return bool(cmd) and line[-len(cmd) :] == cmd


def is_ours(entry: dict[str, Any]) -> bool:
    """Whether the recorded process still runs: same PID and same command line."""
    try:
        proc = psutil.Process(int(entry["pid"]))
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return _same_command(proc, [str(c) for c in entry["cmd"]])
    except (psutil.NoSuchProcess, psutil.AccessDenied, KeyError, ValueError):
        return False


def group_members(entry: dict[str, Any]) -> list[int]:
    """Live PIDs of the recorded process group, or [] when the group is not ours.

    The group is ours while its leader is ours, or after the leader died as long as no
    other program took the leader's PID (a new process could then lead the group).
    """
    pgid = int(entry.get("pgid", entry["pid"]))
    if pgid == os.getpgrp():
        return []  # never the caller's own group, whatever the record says
    cmd = [str(c) for c in entry["cmd"]]
    try:
        line = psutil.Process(pgid).cmdline()  # empty while it exits
        if line and line[-len(cmd) :] != cmd:
            return []  # the PID now belongs to another program
    except (psutil.NoSuchProcess, psutil.AccessDenied):  # gone, or a zombie
        pass
    members: list[int] = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                members.append(proc.pid)
        except (ProcessLookupError, psutil.NoSuchProcess, PermissionError):
            continue
    return members


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
    """SIGTERM the recorded process group, SIGKILL after `grace_s`; what happened.

    "not running" (nothing of it was left), "stopped", "killed", or "could not stop
    PIDs [...]" when members of the group survived SIGKILL.
    """
    if not group_members(entry):
        return "not running"
    pgid = int(entry.get("pgid", entry["pid"]))
    with suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and group_members(entry):
        time.sleep(0.5)
    if not group_members(entry):
        return "stopped"
    with suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and group_members(entry):
        time.sleep(0.2)
    left = group_members(entry)
    return f"could not stop PIDs {left}" if left else "killed"


def listening(port: int) -> bool:
    """Whether something accepts TCP connections on loopback `port`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0
