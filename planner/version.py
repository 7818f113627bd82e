"""rlplan's version, the one place it is written (pyproject.toml reads it from here: hatch's
`[tool.hatch.version]`), so `--version` needs no package metadata lookup at start-up."""

VERSION = "0.1.0"
