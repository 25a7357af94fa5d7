"""Headless Chromium for the browser tests, driven by selenium through Debian's chromedriver.

Each driver gets a new empty profile folder and the flags this machine needs (no
sandbox as root, no GPU, no background network, no first-run or sync). Without
Chromium a test is skipped, except in CI (`CI=true`), where `.ci/run` installs it and
its absence is a failure.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # selenium is imported where a browser test runs, never at collection
    from selenium.webdriver.remote.webdriver import WebDriver

FLAGS = (
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--window-size=1400,1000",
)  # fmt: skip


def _binaries() -> tuple[str, str]:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        if os.environ.get("CI", "").lower() == "true":
            raise RuntimeError("CI needs chromium and chromedriver (.ci/run installs them)")
        pytest.skip("chromium / chromedriver not installed")
    return browser, driver


@contextmanager
def chromium() -> Iterator[WebDriver]:
    """A selenium Chrome driver on headless Chromium, quit (and its profile removed) after."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver_path = _binaries()
    profile = tempfile.mkdtemp(prefix="reflex-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def screenshot_spread(png: bytes) -> tuple[int, float]:
    """Distinct colours and pixel standard deviation of a screenshot (blank: 1 and 0.0)."""
    import numpy as np
    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    colours = len(np.unique(pixels.reshape(-1, 3), axis=0))
    return colours, float(pixels.std())


def free_port() -> int:
    """A TCP port on loopback nobody listens on right now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def mlflow_server(tracking_uri: str, *, timeout_s: float = 150.0) -> Iterator[str]:
    """`mlflow server` on a free loopback port for this store; stopped even on failure.

    One worker and no job runner: the UI only reads. The server runs in its own process
    group, which is terminated (then killed) on exit, children included.
    """
    import signal
    import subprocess
    import sys
    import time
    import urllib.request
    from pathlib import Path

    port = free_port()
    exe = str(Path(sys.executable).with_name("mlflow"))
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    log = tempfile.NamedTemporaryFile(prefix="mlflow-server-", suffix=".log", delete=False)  # noqa: SIM115
    proc = subprocess.Popen(
        [exe, "server", "--backend-store-uri", tracking_uri, "--host", "127.0.0.1",
         "--port", str(port), "--workers", "1"],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited: {Path(log.name).read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"mlflow server not up in {timeout_s:.0f} s")
            time.sleep(0.5)
        yield base
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)
        log.close()
        os.unlink(log.name)
