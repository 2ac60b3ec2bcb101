"""Session files on disk, in pi's JSONL layout, split by concern.

`file_format` knows pi's line format and upgrades its older versions, `locking` serialises
access to one file across threads and processes, `appends` makes writes durable and
idempotent, `loading` reads files back through a per-process cache, `catalog` names and
finds session files, and `session_store.SessionStore` is the one object callers hold
(`errors` has what they catch). Beside each session file, `sidecar` places the working
files (parked tool results, live deltas) and `live_channel` writes and tails the deltas;
`modes` keeps all of them private to their owner. Nothing here is an activity: the CLI
uses it directly and the worker's activities wrap it.
"""
