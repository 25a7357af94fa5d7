"""Peak resident memory and CPU seconds of one phase of a benchmark.

`getrusage`'s peak covers the whole process (input generation included), so each
phase is sampled on its own by a thread reading the process's RSS every 20 ms; CPU
seconds are this process's user + system time over the phase (the database server's
own CPU is not included: on SQLite there is none, on PostgreSQL it is another process).
"""

from __future__ import annotations

import resource
import threading
from types import TracebackType

import psutil

SAMPLE_S = 0.02


def cpu_s() -> float:
    """User + system CPU seconds of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class PeakRss:
    """`with PeakRss() as p: ...` then `p.peak_mb` and `p.cpu_s` for that block."""

    def __init__(self) -> None:
        self._proc = psutil.Process()
        self._stop = threading.Event()
        self._peak = 0
        self._cpu0 = 0.0
        self.cpu_s = 0.0
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self._peak = max(self._peak, self._proc.memory_info().rss)
            self._stop.wait(SAMPLE_S)

    def __enter__(self) -> PeakRss:
        self._cpu0 = cpu_s()
        self._peak = self._proc.memory_info().rss
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        self._peak = max(self._peak, self._proc.memory_info().rss)
        self.cpu_s = round(cpu_s() - self._cpu0, 3)

    @property
    def peak_mb(self) -> float:
        """Highest RSS seen during the block, in MB."""
        return round(self._peak / 2**20, 1)
