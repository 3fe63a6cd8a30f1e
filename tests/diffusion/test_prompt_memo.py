"""The prompt memo: an unchanged prompt is not encoded again, and it holds at most its bytes."""

from __future__ import annotations

import torch

from inline_core.components.interfaces import Conditioning
from inline_core.diffusion.encoders.memo import PromptMemo


def encoder(calls: list[str], width: int = 4):
    def encode(prompt: str) -> Conditioning:
        calls.append(prompt)
        return Conditioning(value=torch.full((len(prompt), width), float(len(calls))), tokens=1)

    return encode


def test_a_kept_prompt_is_not_encoded_again_and_the_same_conditioning_comes_back() -> None:
    calls: list[str] = []
    memo = PromptMemo()
    first = memo.encode("a fox", encoder(calls))
    again = memo.encode("a fox", encoder(calls))
    assert again is first and calls == ["a fox"]
    assert (memo.hits, memo.misses) == (1, 1)


def test_the_least_recently_used_prompt_goes_first_when_the_bytes_run_out() -> None:
    calls: list[str] = []
    one_prompt = 5 * 4 * 4  # five tokens of four float32s
    memo = PromptMemo(max_bytes=2 * one_prompt)
    for prompt in ("aaaaa", "bbbbb", "aaaaa", "ccccc"):  # "aaaaa" used again: "bbbbb" is oldest
        memo.encode(prompt, encoder(calls))
    assert len(memo) == 2 and memo.bytes_held == 2 * one_prompt
    memo.encode("aaaaa", encoder(calls))
    memo.encode("bbbbb", encoder(calls))
    assert calls == ["aaaaa", "bbbbb", "ccccc", "bbbbb"]


def test_a_prompt_larger_than_the_memo_is_encoded_but_not_kept() -> None:
    calls: list[str] = []
    memo = PromptMemo(max_bytes=8)
    memo.encode("long prompt", encoder(calls))
    memo.encode("long prompt", encoder(calls))
    assert calls == ["long prompt", "long prompt"] and len(memo) == 0
