"""The operations layer: one function per stage of the learning cycle.

Every stage is `op(resources, **params) -> report`: it takes the `Resources` chosen from
settings (`adapters/resources.py`) and plain parameters, does its work in its own
transaction(s) and returns a small typed report. Every entry point calls these and
nothing below them: a Prefect task wraps exactly one operation (`tasks/stages.py`), a
flow composes tasks through the sequences written once in `cycle.py`, and the CLI, the
demo, the benchmarks and the tests call operations directly. See `docs/architecture.md`.

| module | stages |
|---|---|
| `intake` | ingest files, record agent rows, ingest a drop folder, consume a preview, admit |
| `maturation` | plan (the cycle's clock), settle, mature |
| `evaluation` | evaluate, replay, promote |
| `reflection` | reflect (one role) |
| `memory` | record episodes (one role), namespaces due, distil (one namespace) |
| `recall` | recall with the bandit's retrieval policy (active mode) |
| `cycle_runs` | the parent tracking run of one cycle: begin, end |
| `structures` | structure search: prepare, search, test, store, register, activate |
| `structure_audit` | drift of active structure bundles, quarantine, rollback (`audit` flow) |
| `cycle` | the sequences: intake, maturation, reflection, memory, the whole cycle |
"""
