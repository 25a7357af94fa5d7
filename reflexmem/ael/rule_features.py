"""What the rule agent reads off a view: every rule's weights and the regime.

Rule weights and the regime at bar t are pure functions of closes 0..t, so they are
cached by the view's history digest and shared by every seed and variant of a process.
"""

from __future__ import annotations

import numpy as np

from reflexmem.ael.environment import MarketView
from reflexmem.ael.regimes import TAIL, regime_at
from reflexmem.ael.rules import MAX_HISTORY, Rule, arm_weights_at

_VIEW_CACHE: dict[tuple[bytes, tuple[Rule, ...]], tuple[np.ndarray, int]] = {}
_VIEW_CACHE_SIZE = 50_000


def view_features(view: MarketView, rules: tuple[Rule, ...]) -> tuple[np.ndarray, int]:
    """Every rule's weights and the regime at bar t, cached by the view's history key.

    Both are pure functions of closes 0..t, so every seed and variant of a process
    shares them (the key is a digest of exactly what the view shows).
    """
    key = (view.history_key, rules)
    hit = _VIEW_CACHE.get(key)
    if hit is None:
        tail = view.tail(max(MAX_HISTORY, TAIL))
        hit = (arm_weights_at(tail, rules), regime_at(tail))
        hit[0].setflags(write=False)
        if len(_VIEW_CACHE) >= _VIEW_CACHE_SIZE:
            _VIEW_CACHE.clear()
        _VIEW_CACHE[key] = hit
    return hit
