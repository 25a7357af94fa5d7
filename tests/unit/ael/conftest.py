"""D-full fixtures live in tests/conftest.py; this folder needs nothing else."""
