"""The parts of the session workflow: each class owns one job and is built in the
workflow's `__init__`; the agent loop talks to them only through its port."""
