"""The graph engine: schema, descriptors, registry, validation, ordering and execution."""
