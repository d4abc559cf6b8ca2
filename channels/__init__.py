"""The lanes: one package per platform (plus the terminal), each a translator between its
platform and the runtime (docs/ARCHITECTURE.md §2). Importing any of them imports this
package first, which registers the built-in lanes with the runtime (`channels.registry`), so
their settings sections exist before settings are read.
"""

from channels import registry as registry
