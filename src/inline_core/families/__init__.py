"""Model families: each a plug-in on the contract (`inline_core.contract`), found by the
`inline_core.families` entry point group, and the node runners every family shares (`nodes/`).
A new family is a subpackage beside `zimage/` (or a distribution of its own)."""
