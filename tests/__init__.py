"""rlplan's tests: a regular package, so `tests.*` resolves here before the top-level `tests`
packages verl and OpenRLHF install (tests/frameworks.txt)."""
