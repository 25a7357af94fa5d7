"""reflexmem."""
