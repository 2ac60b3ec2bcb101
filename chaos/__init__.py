"""Fault injection for tempi: run `python -m chaos --help`."""
