"""The stack's processes are recognised by PID and command line, and stopped as a group.

A stop must never lose track of what it started: not when the clock steps (the recorded
start time is then off by seconds), not when the group's leader died before its
children. And it must never signal a program that merely reuses a recorded PID.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import psutil

from apps.deploy.processes import group_members, is_ours, listening, start_process, stop_process

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]
PARENT = [
    sys.executable,
    "-c",
    "import subprocess, sys, time; "
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); time.sleep(120)",
]


def _children(pid: int) -> list[psutil.Process]:
    for _ in range(50):
        found = psutil.Process(pid).children()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError("the child did not start")


def _gone(proc: psutil.Process) -> bool:
    """Dead, or a zombie nobody reaped yet (an orphan in a container without an init)."""
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_stepped_clock_does_not_lose_the_process(tmp_path: Path) -> None:
    entry = start_process("sleeper", SLEEPER, dict(os.environ), tmp_path)
    try:
        stepped = {**entry, "started": entry["started"] - 15.0}  # the clock moved 15 s
        assert is_ours(stepped)
        assert stop_process(stepped, grace_s=5) == "stopped"
        assert _gone(psutil.Process(entry["pid"])) if psutil.pid_exists(entry["pid"]) else True
    finally:
        stop_process(entry, grace_s=1)


def test_a_reused_pid_is_never_signalled() -> None:
    # as recorded at start (its own session: pgid = pid), the PID now another program's
    other = {"pid": os.getpid(), "pgid": os.getpid(), "cmd": SLEEPER, "started": 0}
    assert not is_ours(other)
    assert group_members(other) == []
    assert stop_process(other) == "not running"  # and this test process still runs
    own = {"pid": 2**22 + 7, "pgid": os.getpgrp(), "cmd": SLEEPER, "started": 0}
    assert group_members(own) == []  # the caller's own group is never a target


def test_the_whole_group_is_stopped_even_after_its_leader_died(tmp_path: Path) -> None:
    entry = start_process("parent", PARENT, dict(os.environ), tmp_path)
    try:
        (child,) = _children(entry["pid"])
        psutil.Process(entry["pid"]).kill()
        psutil.Process(entry["pid"]).wait(5)
        assert not is_ours(entry)
        assert group_members(entry) == [child.pid]  # the orphan is still ours to stop
        assert stop_process(entry, grace_s=5) == "stopped"
        assert _gone(child)
    finally:
        stop_process(entry, grace_s=1)


def test_a_port_is_seen_listening_until_it_is_closed() -> None:
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert listening(port)
    assert not listening(port)
