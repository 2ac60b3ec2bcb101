"""MCP servers on the worker: their connections, their tools' results, the activities."""
