"""Activity names shared by the workflow (which must not import activity code) and workers."""

CALL_LLM = "call_llm"
RUN_TOOL = "run_tool"
RUN_USER_BASH = "run_user_bash"
FLUSH_ENTRIES = "flush_entries"
COMPACT = "compact"
SUMMARIZE_BRANCH = "summarize_branch"
