"""The online-portfolio peers and the classic panels, from an isolated environment.

`universal-portfolios` 0.4.17 pins pandas below 3 and pulls network clients, so it
never enters the project's environment: `apps/bench/olps_runner.py` runs under
`uv run --isolated --no-project --with universal-portfolios==0.4.17 --with six
python -I`, and the two sides exchange CSV files only. The classic panels (nyse_o,
nyse_n, djia, msci, tse, sp500) are read from the installed package's data files
inside that run and are not copied into the repository. The peers' weights come back
per fold and are priced here, in the project's environment, with the project's own
cost rule (`reflexmem.ael.pricing`), so they are measured exactly like every other row.

The first isolated run downloads the package from PyPI into uv's cache (about 10 s);
later runs start in about a second. Without `uv` on PATH or without network access on
first use, `PeerError` says so.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from reflexmem.ael.pricing import fold_span
from reflexmem.ael.splits import ChronoSplits
from reflexmem.prices.panel import PricePanel

PACKAGE = "universal-portfolios==0.4.17"
RUNNER = Path(__file__).with_name("olps_runner.py")
CLASSIC_PANELS = ("nyse_o", "nyse_n", "djia", "msci", "tse", "sp500")
PEERS = ("olmar", "pamr", "ons", "up", "bcrp")
CLASSIC_BARS_PER_YEAR = 252.0


class PeerError(RuntimeError):
    """The isolated peer environment could not be run."""


def isolated_command(*args: str) -> list[str]:
    """The command line that runs the peer runner in its own environment."""
    uv = shutil.which("uv")
    if uv is None:
        raise PeerError("`uv` is not on PATH: it is needed to run the peers in isolation")
    return [
        uv,
        "run",
        "--isolated",
        "--no-project",
        "--quiet",
        "--with",
        PACKAGE,
        "--with",
        "six",
        "python",
        "-I",
        str(RUNNER),
        *args,
    ]


def _check(proc: subprocess.CompletedProcess[str], what: str) -> None:
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
        raise PeerError(f"{what} failed (exit {proc.returncode}):\n{tail}")


def _synthetic_clock(n: int) -> tuple[np.ndarray, np.ndarray]:
    days = np.busday_offset("2000-01-03", np.arange(n), roll="forward")
    return days.astype("datetime64[us]"), days.astype("datetime64[D]")


def load_classic_panel(name: str, workdir: Path | None = None) -> PricePanel:
    """One classic panel from the package's data files (prices; no dates in them).

    The files carry no dates, so bars get a synthetic business-day clock (from
    2000-01-03) for the panel object only: splits are by fraction of bars.
    """
    if name not in CLASSIC_PANELS:
        raise ValueError(f"unknown classic panel {name!r}; have {', '.join(CLASSIC_PANELS)}")
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        out = Path(tmp) / f"{name}.csv"
        proc = subprocess.run(
            isolated_command("export", name, str(out)), capture_output=True, text=True
        )
        _check(proc, f"exporting the classic panel {name}")
        frame = pl.read_csv(out)
    tickers = tuple(c for c in frame.columns if c != "bar")
    closes = frame.select(tickers).to_numpy().astype(np.float64)
    stamps, dates = _synthetic_clock(closes.shape[0])
    return PricePanel(stamps, dates, tickers, closes, f"universal-portfolios:{name}")


def _segments(folds: tuple[ChronoSplits, ...]) -> list[dict[str, int]]:
    out = []
    for f, splits in enumerate(folds):
        start, stop = fold_span(splits)
        out.append(
            {
                "fold": f,
                "start": start,
                "stop": stop,
                "test_start": splits.test.start,
                "test_stop": splits.test.stop,
            }
        )
    return out


@dataclass
class PeerJob:
    """One isolated run of every peer on every fold of one panel, started in background."""

    panel: PricePanel
    folds: tuple[ChronoSplits, ...]
    workdir: Path
    started: float = field(default=0.0)
    _proc: subprocess.Popen[str] | None = field(default=None, repr=False)

    @classmethod
    def start(cls, panel: PricePanel, folds: tuple[ChronoSplits, ...], workdir: Path) -> PeerJob:
        """Write the prices and segments, launch the runner, return at once."""
        workdir.mkdir(parents=True, exist_ok=True)
        prices = workdir / "prices.csv"
        frame = pl.DataFrame({t: panel.closes[:, i] for i, t in enumerate(panel.tickers)})
        frame.insert_column(0, pl.Series("bar", np.arange(panel.n_bars)))
        frame.write_csv(prices, float_precision=12)
        (workdir / "segments.json").write_text(json.dumps(_segments(folds)))
        job = cls(panel, folds, workdir, time.perf_counter())
        job._proc = subprocess.Popen(
            isolated_command(
                "run", str(prices), str(workdir / "segments.json"), str(workdir / "weights")
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        return job

    def result(self) -> tuple[dict[tuple[str, int], np.ndarray], float]:
        """Wait; return {(peer, fold): weights per decision bar} and the wall seconds."""
        assert self._proc is not None
        out, errs = self._proc.communicate()
        proc = subprocess.CompletedProcess(self._proc.args, self._proc.returncode, out, errs)
        _check(proc, "running the online-portfolio peers")
        seconds = time.perf_counter() - self.started
        weights: dict[tuple[str, int], np.ndarray] = {}
        folder = self.workdir / "weights"
        for f, splits in enumerate(self.folds):
            start, stop = fold_span(splits)
            for peer in PEERS:
                path = folder / f"{peer}_{f}.csv"
                frame = pl.read_csv(path)
                bars = frame["bar"].to_numpy()
                if not np.array_equal(bars, np.arange(start, stop - 1)):
                    raise PeerError(f"{path}: decision bars do not match fold {f}")
                weights[(peer, f)] = frame.select(self.panel.tickers).to_numpy().astype(float)
        return weights, seconds
