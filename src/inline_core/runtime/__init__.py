"""Run-time services a node sees: context, cancellation, progress, take storage."""
