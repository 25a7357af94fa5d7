"""MLflow runs of reflection batches: the `reflection-runs` experiment.

One run per reflection batch of one role, opened just before the batch's summary row
is written (the row stores the run ID; the run's `reflexmem.batch_id` tag names the
row) and finished after the commit. It carries the reflector kind and model, the
budget limits and what the batch used (model calls, tokens), the outcome-class counts
as metrics, the role skill file version the role was judged against, the decision set
as a dataset input with the searchable tags of `tracking_sets`, and the lessons table
(every verdict with its case, decision, symbol, time, primary evaluation run, class,
lesson and layer) as a Parquet artifact.
"""

from __future__ import annotations

from adapters.tracking.registry import DefinitionRegistry
from adapters.tracking.runs import RunStore
from adapters.tracking.sets import log_decision_set, set_tags
from reflexmem.operations.resources import ReflectionRun
from reflexmem.reflection.batch import RoleReport
from reflexmem.registry import RoleRegistry

EXPERIMENT = "reflection-runs"
LESSONS_FILE = "lessons.parquet"
QUERY = """
SELECT c.case_id, rc.decision_id FROM reflection_batch_cases c
JOIN role_cases rc ON rc.case_id = c.case_id WHERE c.batch_id = '{batch_id}'
"""


class ReflectionRuns:
    """Opens and finishes the runs of reflection batches."""

    def __init__(
        self, store: RunStore, definitions: DefinitionRegistry, roles: RoleRegistry | None
    ) -> None:
        self.store = store
        self.definitions = definitions
        self.roles = roles

    def _role_skill(self, role_id: str) -> dict[str, str]:
        if self.roles is None or role_id not in self.roles:
            return {}
        versions = self.definitions.ensure_roles(self.roles)
        model, version = versions[role_id]
        return {"reflexmem.role_skill": model, "reflexmem.role_skill_version": version}

    def open(self, run: ReflectionRun) -> str:
        """The batch's run, with parameters, the decision set and its searchable tags."""
        report = run.batch.report
        cases = run.batch.cases
        tags = {
            "reflexmem.kind": "reflection",
            "reflexmem.batch_id": report.batch_id,
            "reflexmem.role_id": report.role_id,
            "reflexmem.reflector": run.reflector,
            "reflexmem.model": run.model or "none",
            "reflexmem.profile": run.profile,
            **self._role_skill(report.role_id),
            **set_tags(cases),
        }
        name = f"reflect-{report.role_id}-{report.batch_id}"
        run_id = self.store.create_run(EXPERIMENT, name, tags, run.cycle_id)
        budget = run.budget
        params: dict[str, object] = {
            "role_id": report.role_id,
            "reflector": run.reflector,
            "model": run.model or "none",
            "profile": run.profile,
            "batch_id": report.batch_id,
            "budget_calls_per_batch": budget.calls_per_batch if budget else "unlimited",
            "budget_tokens_per_batch": budget.tokens_per_batch if budget else "unlimited",
            "budget_calls_per_day": budget.calls_per_day if budget else "unlimited",
            "budget_tokens_per_day": budget.tokens_per_day if budget else "unlimited",
        }
        self.store.log_params(run_id, params)
        log_decision_set(
            self.store.client,
            run_id,
            cases.select("decision_id", "case_id", "role_id", "symbol", "decided_at"),
            name=f"decisions-{report.batch_id}",
            context="reflection",
            ledger_url=self.store.ledger_url,
            query=QUERY.format(batch_id=report.batch_id),
        )
        return run_id

    def finish(self, run: ReflectionRun, report: RoleReport) -> None:
        """Log counts, budget used and the lessons table, then close the run."""
        if report.mlflow_run_id is None:
            return
        metrics = {
            "offered": float(report.offered),
            "reflected": float(report.reflected),
            "failed": float(report.failed),
            "deferred": float(report.deferred),
            "lessons": float(report.lessons),
            "model_calls": float(report.model_calls),
            "tokens": float(report.tokens),
            "audit_records": float(report.audit_records),
            **{f"class_{k}": float(v) for k, v in report.by_class.items()},
        }
        budget = run.budget
        if budget is not None and budget.calls_per_batch:
            metrics["budget_calls_used_share"] = report.model_calls / budget.calls_per_batch
        if budget is not None and budget.tokens_per_batch:
            metrics["budget_tokens_used_share"] = report.tokens / budget.tokens_per_batch
        self.store.log_metrics(report.mlflow_run_id, metrics)
        self.store.log_parquet(report.mlflow_run_id, run.batch.cases, LESSONS_FILE)
        self.store.client.set_terminated(report.mlflow_run_id, "FINISHED")
