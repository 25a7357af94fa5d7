"""Ingestion of agent ledger files (decisions, previews, executions, fills, outcomes)."""
