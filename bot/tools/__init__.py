"""Tools the model can call: what a tool is, where tools come from, which are offered, how one runs.

Owns the `Tool` shape (a JSON Schema for its arguments, validation, a run), the
registry of every tool (built-in ones and those of MCP servers), the policy that
answers allow, ask or deny per tool and audience (admins, members, public, groups) within
what a persona and the deployment offer, and running one call
into a `ToolResult` that never raises. The turn engine calls these; storing calls and
results is the engine's, rebuilding them for the model is `transcript`'s.
"""
