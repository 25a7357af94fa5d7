"""AEL portfolio benchmark: point-in-time environment, rules, agents, statistics.

Modules: `panel` (price panels and loaders), `splits` (chronological splits and
walk-forward folds), `environment` (point-in-time stepping and pricing), `baselines`
and `rules` (the fixed allocation rules), `regimes`, `metrics`, `stats` and
`significance` (standard errors, bootstrap intervals, SPA), `tools`,
`tools_calibration` and `pit_guard` (analysis tools and the evidence guard), `roles`,
`agent` (reference agents), `rule_agent`, `rule_memory`, `rule_features`, `frozen`,
`learning_variants` and `learning` (the learning agent and its table rows), `pricing`,
`table`, `run_tasks`, `run` and `results` (the runner), `report`, `plots` and
`learning_plots`.
"""
