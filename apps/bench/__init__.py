"""Benchmarks: CLI commands that print JSON, each beside its honest floor."""
