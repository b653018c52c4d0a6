"""The policy engine: pure functions and objects over bytes and strings, no I/O."""
