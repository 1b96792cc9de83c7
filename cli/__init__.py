"""The amber command line (typer)."""
