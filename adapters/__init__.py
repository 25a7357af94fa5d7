"""Adapters: the ledger engine and its migrations, MLflow tracking, resources from settings.

Everything here binds a seam of the core (`reflexmem.operations.resources`) to a real
component; nothing here starts a flow or serves a user.
"""
