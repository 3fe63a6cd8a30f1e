"""Qwen-Image's prompt encoder: Qwen2.5-VL's last hidden state of the prompt in its template.

Text to image: the prompt in Qwen-Image's template, the template's 34 leading tokens dropped, at
most 1024 tokens kept (`QwenImagePipeline`). Edit: each reference image, resized to about 384x384
pixels, is shown to the vision tower as `Picture N:` before the prompt in the edit template, and
64 leading tokens are dropped (`QwenImageEditPlusPipeline`). One prompt is encoded alone, so no
padding enters the model; its embeddings are its real tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import torch
from PIL import Image
from torch import nn

from inline_core.components.interfaces import Conditioning
from inline_core.diffusion.encoders.memo import PromptMemo
from inline_core.diffusion.placement import OffloadSwap, PlacementLike
from inline_core.errors import RunFailed
from inline_core.families.qwen_image.request import condition_size

TEXT_TEMPLATE = (
    "<|im_start|>system\nDescribe the image by detailing the color, shape, size, texture, "
    "quantity, text, spatial relationships of the objects and background:<|im_end|>\n"
    "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
)
TEXT_DROP = 34
EDIT_TEMPLATE = (
    "<|im_start|>system\nDescribe the key features of the input image (color, shape, size, "
    "texture, objects, background), then explain how the user's text instruction should alter "
    "or modify the image. Generate a new image that meets the user's requirements while "
    "maintaining consistency with the original input where appropriate.<|im_end|>\n"
    "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
)
EDIT_DROP = 64
PICTURE = "Picture {}: <|vision_start|><|image_pad|><|vision_end|>"
MAX_TOKENS = 1024
MODEL_INPUTS = ("input_ids", "attention_mask", "pixel_values", "image_grid_thw")


class QwenPromptEncoder:
    def __init__(
        self,
        tokenizer: Any,
        processor: Any,
        model: nn.Module,
        placement: PlacementLike,
        swap: OffloadSwap,
        resize: Any,
    ) -> None:
        self.tokenizer = tokenizer
        self.processor = processor  # None: no image processor was found (text to image only)
        self.model = model
        self.placement = placement
        self.swap = swap
        self.resize = resize  # the pipeline's image resize (diffusers' VaeImageProcessor's)
        self.memo = PromptMemo()  # an unchanged text prompt is not encoded again

    def encode(self, prompt: str, /) -> Conditioning:
        return self.memo.encode(prompt, self._encode_text)

    def _encode_text(self, prompt: str) -> Conditioning:
        batch = self.tokenizer(
            [TEXT_TEMPLATE.format(prompt)],
            max_length=MAX_TOKENS + TEXT_DROP,
            truncation=True,
            return_tensors="pt",
        )
        return self._hidden(dict(batch), TEXT_DROP)

    def encode_edit(self, prompt: str, images: Sequence[Image.Image], /) -> Conditioning:
        """The prompt with its reference images shown to the vision tower."""
        if self.processor is None:
            raise RunFailed(
                "the Qwen-Image-Edit text encoder has no image processor "
                "(preprocessor_config.json) beside its tokenizer"
            )
        pictures = "".join(PICTURE.format(i + 1) for i in range(len(images)))
        shown = [self.condition_image(image) for image in images]
        batch = self.processor(
            text=[EDIT_TEMPLATE.format(pictures + prompt)],
            images=shown,
            padding=True,
            return_tensors="pt",
        )
        return self._hidden(dict(batch), EDIT_DROP)

    def condition_image(self, image: Image.Image) -> Image.Image:
        width, height = condition_size(image.size)
        return cast(Image.Image, self.resize(image, height, width))

    def _hidden(self, batch: dict[str, Any], drop: int) -> Conditioning:
        device = torch.device(self.placement.device)
        inputs = {k: batch[k].to(device) for k in MODEL_INPUTS if k in batch}
        mask = inputs["attention_mask"].bool()
        with self.swap.use(self.model, self.placement), torch.inference_mode():
            out = self.model(**inputs, output_hidden_states=True)
            hidden = cast(tuple[torch.Tensor, ...], out.hidden_states)[-1]
            embeds = hidden[0][mask[0]][drop:][:MAX_TOKENS]
        return Conditioning(value=embeds, tokens=int(embeds.shape[0]))
