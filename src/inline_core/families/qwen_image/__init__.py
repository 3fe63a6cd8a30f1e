"""Qwen-Image and Qwen-Image-Edit (2509, 2511) as a family: text to image, and editing from one to
three reference images, on the node `alibaba/qwen-image`."""

from inline_core.families.qwen_image.family import QwenImageFamily

__all__ = ["QwenImageFamily"]
