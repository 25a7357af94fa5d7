"""Fail-closed admission of executions into role cases (docs/design.md §4)."""
