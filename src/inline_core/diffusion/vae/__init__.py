"""VAE components (imports torch)."""
