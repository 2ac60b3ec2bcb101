"""tempi's benchmarks: run `python -m bench --help`."""
