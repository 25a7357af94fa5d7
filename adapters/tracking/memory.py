"""MLflow runs of distillation: one run per batch of windows, nested in its cycle's run.

Distillation writes the semantic patterns and procedural rules the memory recalls; a
reviewer in the MLflow UI must be able to find the batch that made a pattern or rule
from the cycle that ran it. Each batch of windows one stage distilled (inside the
episodes stage, or the sweep) is a run of the `memory-distillation` experiment with the
cycle's run as parent: its namespace and counts, the versions it wrote, promoted,
confirmed, rejected or followed (a new version of an active rule) as a Parquet artifact
(`pattern_versions.parquet`, one row per entry with tier, state, text, support, wins and
losses), and their IDs as searchable
tags (`reflexmem.pattern_ids`, `reflexmem.rule_ids`: comma-framed, so
`tags.reflexmem.pattern_ids LIKE '%,ID,%'` finds the run of one version).
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from adapters.tracking.runs import RunStore

EXPERIMENT = "memory-distillation"
DESCRIPTION = (
    "One run per batch of distilled memory windows, nested in its learning cycle. Find the "
    "run of a pattern or rule with tags.reflexmem.pattern_ids LIKE '%,ENTRY_ID,%' (or "
    "rule_ids); the Parquet artifact lists every version the batch wrote or moved."
)
VERSIONS_FILE = "pattern_versions.parquet"
TAG_CHARS = 5000
"""MLflow's tag value limit is larger; this keeps a batch's ID lists readable."""


def _framed(ids: list[str]) -> str:
    text = "," + ",".join(ids) + "," if ids else ""
    return text if len(text) <= TAG_CHARS else text[: TAG_CHARS - 4] + "...,"


class DistillationRuns:
    """Records distillation batches in the `memory-distillation` experiment."""

    def __init__(self, store: RunStore) -> None:
        self.store = store

    def log(
        self,
        namespace: str,
        versions: pl.DataFrame,
        counts: Mapping[str, float],
        cycle_id: str | None,
    ) -> str:
        """One finished run for one distillation batch; its ID."""
        self.store.experiment(EXPERIMENT, DESCRIPTION)
        tiers = versions["tier"].to_list() if "tier" in versions.columns else []
        ids = versions["entry_id"].to_list() if "entry_id" in versions.columns else []
        patterns = sorted(str(i) for i, t in zip(ids, tiers, strict=True) if t == "semantic")
        rules = sorted(str(i) for i, t in zip(ids, tiers, strict=True) if t == "procedural")
        tags = {
            "reflexmem.kind": "distillation",
            "reflexmem.namespace": namespace,
            "reflexmem.pattern_ids": _framed(patterns),
            "reflexmem.rule_ids": _framed(rules),
        }
        run_id = self.store.create_run(EXPERIMENT, f"distil-{namespace}", tags, cycle_id)
        self.store.log_params(run_id, {"namespace": namespace})
        self.store.log_metrics(run_id, counts)
        if versions.height:
            self.store.log_parquet(run_id, versions, VERSIONS_FILE)
        self.store.client.set_terminated(run_id, "FINISHED")
        return run_id
