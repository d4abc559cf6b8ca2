"""Tools the model can call: what a tool is, where tools come from, which are offered, how one runs.

Owns the `Tool` shape (a JSON Schema for its arguments, validation, a run), the
registry of every tool (built-in ones and those of MCP servers), the policy that
decides which tools a persona, a group or a deployment offers, and running one call
into a `ToolResult` that never raises. The turn engine calls these; storing calls and
results is the engine's, rebuilding them for the model is `transcript`'s.
"""
