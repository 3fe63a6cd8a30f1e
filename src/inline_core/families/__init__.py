"""Model families: the contract a family implements, how families are found (entry points), and the
node runners every family shares. A new family is a subpackage beside `zimage/` (or a distribution
of its own) registered under the `inline_core.families` entry point group."""
