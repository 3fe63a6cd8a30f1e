"""Qwen2.5-VL's processor for the edit models' reference images, without its video half.

transformers' `Qwen2VLProcessor` needs torchvision for its video processor, which this install
does not carry; Qwen-Image shows it still images only. So the processor is built from the
tokenizer and the slow (PIL) `Qwen2VLImageProcessor` alone: the same class's `__call__` (each
`<|image_pad|>` expanded to the image's merged patch count, the pixels patchified), never its
video path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inline_core.diffusion.libs import transformers

IMAGE_TOKEN = "<|image_pad|>"
VIDEO_TOKEN = "<|video_pad|>"


def image_processor(**settings: Any) -> Any:
    return transformers().Qwen2VLImageProcessor(**settings)


def images_only(tokenizer: Any, images: Any) -> Any:
    """A `Qwen2VLProcessor` over `tokenizer` and the image processor `images`."""
    cls: Any = transformers().Qwen2VLProcessor
    processor = cls.__new__(cls)
    processor.image_processor = images
    processor.tokenizer = tokenizer
    processor.video_processor = None
    processor.chat_template = None
    processor.image_token, processor.video_token = IMAGE_TOKEN, VIDEO_TOKEN
    processor.image_token_id = tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
    processor.video_token_id = tokenizer.convert_tokens_to_ids(VIDEO_TOKEN)
    return processor


def load(folder: Path, tokenizer: Any) -> Any:
    """The processor whose `preprocessor_config.json` is in `folder`, local files only."""
    images = transformers().Qwen2VLImageProcessor.from_pretrained(
        str(folder), local_files_only=True
    )
    return images_only(tokenizer, images)
