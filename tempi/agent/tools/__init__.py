"""One module per coding tool, each holding the tool's `DEFINITION`: what the model sees
(the spec) and what a call does to the workspace (the effect). `tempi.agent.tool_specs`
collects them; the implementations live in `tempi.activities.tools`."""
