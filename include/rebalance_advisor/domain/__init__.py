"""Pure domain: no I/O."""
