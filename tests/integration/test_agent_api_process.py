"""`reflexmem api` as its own process: it serves, logs each request, never logs the token."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from adapters import migrate
from adapters.db import make_engine

TOKEN = "process-token-5d2e9a"


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_reflexmem_api_serves_and_logs_requests_without_the_token(tmp_path: Path) -> None:
    home = tmp_path / "home"
    engine = make_engine(f"sqlite:///{home / 'ledger.sqlite'}")
    migrate.upgrade(engine)
    engine.dispose()
    port = _port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REFLEX_", "ROLE_MEMORY"))}
    env |= {"REFLEX_HOME": str(home), "REFLEX_API_TOKEN": TOKEN, "ROLE_MEMORY_MODE": "shadow"}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from apps.cli import main; main()", "api", "--port", str(port)],
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        headers = {"Authorization": f"Bearer {TOKEN}"}
        deadline = time.monotonic() + 90
        health = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                health = httpx.get(f"{url}/v1/health", headers=headers, timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.2)
        assert health is not None, "reflexmem api did not start"
        assert health.status_code == 200
        assert health.json()["mode"] == "shadow"
        assert httpx.get(f"{url}/v1/health").status_code == 401
        assert httpx.post(f"{url}/v1/recall", headers=headers, json={}).status_code == 404
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            output, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
    assert "Logging error" not in output
    assert '"GET /v1/health HTTP/1.1" 200' in output
    assert '"POST /v1/recall HTTP/1.1" 404' in output
    assert TOKEN not in output
