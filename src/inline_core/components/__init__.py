"""Device-agnostic component interfaces and the step protocol. No torch at module top."""
