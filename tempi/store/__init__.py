"""Session files on disk, in pi's JSONL layout, split by concern.

`file_format` knows pi's line format and its older versions, `appends` makes writes durable
and idempotent, `loading` reads files back through a per-process cache, `catalog` names and
finds session files, and `session_store.SessionStore` is the one object callers hold.
Nothing here is an activity: the CLI uses it directly, the worker's activities wrap it.
"""
