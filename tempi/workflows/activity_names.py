"""Activity names shared by the workflow (which must not import activity code) and workers."""

CALL_LLM = "call_llm"
RUN_TOOL = "run_tool"
FLUSH_ENTRIES = "flush_entries"
