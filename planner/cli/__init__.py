"""The `rlplan` command line: thin typer commands over the library layers."""
