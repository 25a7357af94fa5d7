"""Contrasts that count blocks of time, not episodes, as their independent draws.

Decisions taken on the same days share the market's moves, and a return measured over
a ten-bar horizon overlaps the next days'. A contrast that treats every episode as an
independent draw claims far more certainty than that: on real daily prices an
independent-episode test confirmed "long decisions did better" from a few weeks of
trend in nearly every stream, and the rule then held decisions through the test period
to the learner's loss.

So the two groups (carriers of a condition, the rest) are also summed per **block**
(two weeks of decision time for a role's cases; see :func:`tagged_block`), and
the difference of their means gets the cluster-robust variance

    Var = G / (G - 1) * sum_b u_b^2,
    u_b = (S_in,b - m_in n_in,b) / N_in - (S_out,b - m_out n_out,b) / N_out

read against Student's t with G - 1 degrees of freedom (G blocks, at least
`MIN_BLOCKS`). A move common to both groups of a block cancels in ``u_b``; a move that
lasts many blocks shows as their spread.

G is the **effective** number of blocks, not their count: Satterthwaite's
``(sum_b v_b)^2 / sum_b v_b^2`` with ``v_b = n_in,b / N_in^2 + n_out,b / N_out^2`` (each
block's share of the variance when its episodes are independent; equal blocks give
their count). When a condition's carriers crowd into a few blocks, those few decide the
spread. In simulated null streams (`tests/unit/memory/test_blocks_size.py`: 5-10
blocks, 5-15 % carriers, swings of the carriers' own, as a symbol's fortnight moves
every decision on it) the plain count rejected 1.2 times as often as the level at 0.03
and 1.4-1.8 times at 0.0076; the effective count 1.0 and 0.8-1.25 times.

``sum_b u_b^2`` and the effective count expand into ten sums of products of the blocks'
counts and totals, which add block by block: :class:`PairBlocks` keeps them for the
closed blocks and the open block's four figures, so a lineage or a rule extends them
window by window at constant size. Blocks arrive in time order (a
role's cases are recorded oldest first); an episode of a block already closed counts as
a block of its own.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scipy import special

from reflexmem.memory.contrast import CONFIDENCE, MIN_SIDE, Contrast, Moments, result

MIN_BLOCKS = 5
"""Blocks a contrast needs: fewer are one market episode, and give no usable spread."""


def _products(n1: float, s1: float, n2: float, s2: float) -> tuple[float, ...]:
    """One block's ten products, in the order `PairBlocks.sums` keeps them."""
    return (
        s1 * s1,
        s1 * n1,
        n1 * n1,
        s2 * s2,
        s2 * n2,
        n2 * n2,
        s1 * s2,
        s1 * n2,
        n1 * s2,
        n1 * n2,
    )


BlockRow = tuple[int, float, float, float, float]
"""One block's figures: its number, carriers' count and sum, the rest's count and sum."""


@dataclass(frozen=True, slots=True)
class PairBlocks:
    """The ten block sums of two groups over closed blocks, and the open block."""

    closed: int = 0
    sums: tuple[float, ...] = (0.0,) * 10
    """Over closed blocks: S_in², S_in·n_in, n_in², the same three for the rest, then
    S_in·S_out, S_in·n_out, n_in·S_out, n_in·n_out."""
    open_id: int = -1
    open: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)

    @classmethod
    def from_json(cls, value: Mapping[str, object] | None) -> PairBlocks:
        """Blocks stored by :meth:`as_json` (empty when nothing was stored)."""
        if not value:
            return cls()
        sums, opened = value["sums"], value["open"]
        if not isinstance(sums, list) or not isinstance(opened, list):
            raise ValueError("block sums are stored as lists")
        n1, s1, n2, s2 = (float(x) for x in opened)
        return cls(
            int(str(value["g"])),
            tuple(float(x) for x in sums),
            int(str(value["open_id"])),
            (n1, s1, n2, s2),
        )

    def as_json(self) -> dict[str, object]:
        """The sums as JSON."""
        return {
            "g": self.closed,
            "sums": list(self.sums),
            "open_id": self.open_id,
            "open": list(self.open),
        }

    def add(self, rows: Iterable[BlockRow]) -> PairBlocks:
        """Extended by some blocks' figures, in block order (none before the open one)."""
        closed, sums, key, opened = self.closed, list(self.sums), self.open_id, self.open
        for block, n1, s1, n2, s2 in rows:
            if block == key:
                opened = (opened[0] + n1, opened[1] + s1, opened[2] + n2, opened[3] + s2)
                continue
            if key >= 0:  # a later block: the open one closes
                closed += 1
                for i, value in enumerate(_products(*opened)):
                    sums[i] += value
            key, opened = block, (n1, s1, n2, s2)
        return PairBlocks(closed, tuple(sums), key, opened)

    @property
    def blocks(self) -> int:
        """Blocks with an episode, the open one included."""
        return self.closed + (1 if self.open_id >= 0 else 0)

    def contrast(
        self,
        inside: Moments,
        outside: Moments,
        *,
        direction: int = 0,
        confidence: float = CONFIDENCE,
    ) -> Contrast | None:
        """The contrast of the same episodes' moments, clustered (None below `MIN_BLOCKS`)."""
        g = self.blocks
        if g < MIN_BLOCKS or inside.n < MIN_SIDE or outside.n < MIN_SIDE:
            return None
        sums = self.sums
        if self.open_id >= 0:
            sums = tuple(a + b for a, b in zip(sums, _products(*self.open), strict=True))
        ss1, sn1, nn1, ss2, sn2, nn2, ss12, s1n2, n1s2, nn12 = sums
        a, b = float(inside.n), float(outside.n)
        m1, m2 = inside.total / a, outside.total / b
        own1 = ss1 - 2 * m1 * sn1 + m1 * m1 * nn1
        own2 = ss2 - 2 * m2 * sn2 + m2 * m2 * nn2
        cross = ss12 - m2 * s1n2 - m1 * n1s2 + m1 * m2 * nn12
        spread = max(0.0, own1 / (a * a) + own2 / (b * b) - 2 * cross / (a * b))
        # The effective number of blocks: Satterthwaite's count of the terms u_b^2 when
        # each block weighs by its share of the two groups (equal blocks: exactly g).
        weight = nn1 / a**4 + 2.0 * nn12 / (a * a * b * b) + nn2 / b**4
        g_eff = min(float(g), (1.0 / a + 1.0 / b) ** 2 / weight) if weight > 0 else float(g)
        if g_eff <= 2.0:
            return None
        se = math.sqrt(g_eff / (g_eff - 1.0) * spread)
        d, df = m1 - m2, g_eff - 1.0
        half = float(special.stdtrit(df, 0.5 + confidence / 2.0)) * se
        t = d / se if se > 0 else (math.copysign(math.inf, d) if d else math.nan)
        return result(inside, outside, d, d - half, d + half, t, df, direction)


@functools.lru_cache(maxsize=1 << 16)
def tagged_block(tags: tuple[str, ...]) -> int | None:
    """An episode's ``block:<k>`` tag as k, or None (cached: every later window reads it)."""
    for tag in tags:
        if tag.startswith("block:"):
            return int(tag[6:])
    return None


def time_block(
    lineage: Mapping[str, object] | None, window: Iterable[tuple[str, ...]]
) -> int | None:
    """A lineage's latest block when blocks are decision time (every episode of the window tagged).

    `lineage` is its stats (``blocks`` as :meth:`PairBlocks.as_json`), `window` the tags of
    the episodes it was just extended by. A rule formed then saw no decision of a later
    block, so a check made from it may replay on those (`reflex.rule_checks`). None when an
    episode counts blocks by its index (no decision time) or no block was seen.
    """
    tags = list(window)
    if not tags or any(tagged_block(t) is None for t in tags):
        return None
    blocks = (lineage or {}).get("blocks")
    open_id = PairBlocks.from_json(blocks if isinstance(blocks, Mapping) else None).open_id
    return open_id if open_id >= 0 else None
