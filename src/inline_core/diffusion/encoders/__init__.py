"""Prompt encoders over text models (imports torch)."""
