"""Fail-closed admission of executions into role cases (SPEC 4.2-4.3)."""
