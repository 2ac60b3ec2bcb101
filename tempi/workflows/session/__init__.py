"""The parts of the session workflow, each built once in the workflow's `__init__`.

- agent_loop / agent_port: pi's loop, and the port it acts through (workflow_port is the
  real one; tests bring fakes and run the loop in plain asyncio).
- event_log, entries, queues, run_control: the log watchers read, the entries bound for
  the session file, the user's waiting messages, and the run/abort flags.
- llm_call, tool_scheduler + tool_routes (builtin_route, subagent_runner's task route),
  compactor, user_bash, sandbox_lease: what the loop and the handlers ask for.
- activity_options: the one table of activity timeouts and retries.
"""
