"""Online portfolio selection peers, run inside their own isolated environment.

This file is executed by `apps.bench.olps` as

    uv run --isolated --no-project --with universal-portfolios==0.4.17 --with six \
        python -I apps/bench/olps_runner.py <command> ...

and must therefore import nothing from the project: only the standard library,
numpy, pandas and `universal` (the `universal-portfolios` package, FMIT licence),
which pins pandas below 3 and so cannot join the project's environment. `six` is
listed because `universal.algos` imports it without declaring it. Running with
`python -I` keeps the project's folders off `sys.path`.

Commands (files are CSV; the project reads and prices them with its own cost rule):

- `export NAME OUT`: write the classic panel NAME (nyse_o, nyse_n, djia, msci, tse,
  sp500) from the installed package's data files as `bar,<tickers...>` prices.
- `run PRICES SEGMENTS OUT_DIR`: SEGMENTS is JSON `[{"fold": f, "start": a, "stop": b,
  "test_start": c, "test_stop": d}, ...]` of absolute bar indices. For each fold and
  each algorithm (OLMAR, PAMR, ONS, UP with their published defaults; BCRP fitted in
  hindsight on the fold's test bars) writes `<algo>_<fold>.csv` with the weights the
  algorithm holds from each decision bar t (start <= t < stop - 1) to t + 1.

Alignment: `universal` returns B[t] = weights held over X[t] = S[t] / S[t-1], chosen
after seeing S[t-1]; the project's w_t is held over C_t -> C_t+1, so w_t = B[t + 1].
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time

import numpy as np
import pandas as pd

CLASSIC = ("nyse_o", "nyse_n", "djia", "msci", "tse", "sp500")
ONLINE = ("olmar", "pamr", "ons", "up")


def _universal_data_dir() -> str:
    import universal

    return os.path.join(os.path.dirname(os.path.realpath(universal.__file__)), "data")


def export(name: str, out: str) -> None:
    """Write one classic panel of the installed package as CSV."""
    if name not in CLASSIC:
        raise SystemExit(f"unknown classic panel {name!r}; have {', '.join(CLASSIC)}")
    frame = pd.read_csv(os.path.join(_universal_data_dir(), f"{name}.csv"))
    frame.insert(0, "bar", np.arange(len(frame)))
    frame.to_csv(out, index=False)


def _algo(name: str) -> object:
    from universal import algos

    return {
        "olmar": algos.OLMAR,
        "pamr": algos.PAMR,
        "ons": algos.ONS,
        "up": algos.UP,
    }[name]()


def _frame(prices: np.ndarray, columns: list[str]) -> pd.DataFrame:
    # Some algorithms read a frequency off the index, so give them a business-day clock.
    index = pd.bdate_range("2000-01-03", periods=prices.shape[0])
    return pd.DataFrame(prices, index=index, columns=columns)


def run(prices_csv: str, segments_json: str, out_dir: str) -> None:
    """Run every peer on every fold; write weights per decision bar."""
    from universal import tools

    frame = pd.read_csv(prices_csv)
    bars = frame.pop("bar").to_numpy()
    columns = [str(c) for c in frame.columns]
    prices = frame.to_numpy(dtype=float)
    with open(segments_json) as fh:
        segments = json.load(fh)
    os.makedirs(out_dir, exist_ok=True)
    timing: dict[str, float] = {}
    for seg in segments:
        fold, start, stop = int(seg["fold"]), int(seg["start"]), int(seg["stop"])
        window = _frame(prices[start:stop], columns)
        decision_bars = bars[start : stop - 1]
        for name in ONLINE:
            began = time.perf_counter()
            result = _algo(name).run(window, log_progress=False)  # type: ignore[attr-defined]
            weights = np.asarray(result.B, dtype=float)[1:]
            _write(out_dir, name, fold, decision_bars, weights, columns)
            timing[f"{name}_{fold}"] = time.perf_counter() - began
        began = time.perf_counter()
        test = _frame(prices[int(seg["test_start"]) : int(seg["test_stop"])], columns)
        ratios = test / test.shift(1)
        b = tools.opt_weights(ratios.iloc[1:])
        constant = np.repeat(np.asarray(b, dtype=float)[None, :], len(decision_bars), axis=0)
        _write(out_dir, "bcrp", fold, decision_bars, constant, columns)
        timing[f"bcrp_{fold}"] = time.perf_counter() - began
    with open(os.path.join(out_dir, "timing.json"), "w") as fh:
        json.dump(timing, fh)


def _write(
    out_dir: str,
    name: str,
    fold: int,
    bars: np.ndarray,
    weights: np.ndarray,
    columns: list[str],
) -> None:
    out = pd.DataFrame(weights, columns=columns)
    out.insert(0, "bar", bars)
    out.to_csv(os.path.join(out_dir, f"{name}_{fold}.csv"), index=False)


def main(argv: list[str]) -> None:
    """Dispatch `export` and `run`."""
    logging.disable(logging.WARNING)
    if len(argv) == 3 and argv[0] == "export":
        export(argv[1], argv[2])
    elif len(argv) == 4 and argv[0] == "run":
        run(argv[1], argv[2], argv[3])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
