"""Step caching kept per request inside a batched forward (DBCache's algorithm on our own hooks)."""
