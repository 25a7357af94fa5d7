"""flows."""
