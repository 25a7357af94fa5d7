"""AEL portfolio benchmark: point-in-time environment, baselines, agents, metrics.

Modules: `panel` (price panels and loaders), `splits` (chronological splits),
`environment` (point-in-time stepping and pricing), `baselines`, `metrics`,
`tools` and `pit_guard` (analysis tools and the evidence guard), `agent`
(reference agents), `table` (runner, registry, Table 2) and `plots`.
"""
