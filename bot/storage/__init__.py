"""Storage: the tables, their migrations, and one store per concern (all SQL lives here).

`identities` (persons, accounts, link codes), `visitors` (web visitor tokens), `sessions`
(sessions and the routes to them), `messages` (the transcript and its attachments),
`context_records`, `memory_store` (items, search, vectors and offload cursors, a module
each), `deliveries` and `jobs`; `stores.Stores` bundles them for the runtime. Stores are
synchronous: async code calls them through `boundary`. Nothing here decides what the model sees.
"""
