"""The lineage report: one HTML page with plots from the ledger and the MLflow store."""
