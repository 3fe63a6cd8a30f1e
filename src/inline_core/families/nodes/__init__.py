"""The node runners families share: a family's high-level nodes, and the low-level vocabulary
(`load/*`, `encode/text`, `sample`, `vae/*`) dispatching by the family of its handles."""
