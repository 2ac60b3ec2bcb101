"""`tempi pipeline`: one refactor spec run shard by shard over a repository.

This package holds the parts that need no Temporal: the spec (`spec.py`), loading it with
errors a user can act on (`loading.py`), prompt placeholders (`prompts.py`), and finding the
targets and shards at the base commit (`targets.py`), the git work of a run (`git_work.py`),
the spec's commands (`commands.py`), what crosses history (`run_types.py`) and the reports
(`reports.py`).
"""
