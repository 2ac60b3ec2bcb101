"""`tempi` in a terminal without -p: the interactive mode."""
