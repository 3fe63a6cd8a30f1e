"""Prompts as ComfyUI reads them for CLIP (torch-free): `(words:1.3)` and `(words)` weights, and
prompts of any length in 77-token windows (`comfy/sd1_clip.py`'s `SDTokenizer`).

- `(text)` multiplies its weight by 1.1, `(text:w)` sets it to `w`, nested groups multiply;
  `\\(` and `\\)` are literal parentheses. Square brackets are plain text, as in ComfyUI (A1111's
  `[word]` de-emphasis is not ComfyUI's syntax).
- Each weighted piece is tokenized on its own (no start and end tokens) and the pieces fill
  windows of 75 tokens between a start and an end token, padded to 77. A piece that does not fit
  in what is left of a window moves to the next whole, unless it is 8 tokens or longer: then it is
  cut at the window's end, as ComfyUI does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Token = tuple[int, float]  # (token id, weight)
WINDOW = 77
LONG_PIECE = 8  # ComfyUI's `max_word_length`: a piece this long may be cut between windows
_ESCAPES = (("\\)", "\0\1"), ("\\(", "\0\2"))


def _escape(text: str) -> str:
    for literal, code in _ESCAPES:
        text = text.replace(literal, code)
    return text


def _unescape(text: str) -> str:
    for literal, code in _ESCAPES:
        text = text.replace(code, literal[1])
    return text


def _groups(text: str) -> list[str]:
    """Top-level pieces: text between groups, and each `( ... )` group whole (nesting kept)."""
    pieces: list[str] = []
    current = ""
    depth = 0
    for char in text:
        if char == "(":
            if depth == 0:
                if current:
                    pieces.append(current)
                current = "("
            else:
                current += char
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                pieces.append(current + ")")
                current = ""
            else:
                current += char
        else:
            current += char
    if current:
        pieces.append(current)
    return pieces


def _weights(text: str, weight: float) -> list[tuple[str, float]]:
    out: list[tuple[str, float]] = []
    for piece in _groups(text):
        if len(piece) >= 2 and piece[0] == "(" and piece[-1] == ")":
            inner = piece[1:-1]
            inner_weight = weight * 1.1
            colon = inner.rfind(":")
            if colon > 0:
                try:
                    inner_weight = float(inner[colon + 1 :])
                    inner = inner[:colon]
                except ValueError:
                    pass
            out += _weights(inner, inner_weight)
        else:
            out.append((piece, weight))
    return out


def parse_weights(text: str) -> list[tuple[str, float]]:
    """The prompt's pieces and their weights, in order (ComfyUI's `token_weights`)."""
    return [(_unescape(piece), w) for piece, w in _weights(_escape(text), 1.0)]


def windows(pieces: Sequence[Sequence[Token]], start: int, end: int, pad: int) -> list[list[Token]]:
    """Tokenized pieces laid into 77-token windows, each `start ... end pad...`."""
    body = WINDOW - 2
    out: list[list[Token]] = []
    window: list[Token] = []
    for piece in pieces:
        rest = list(piece)
        cuttable = len(rest) >= LONG_PIECE
        while rest:
            room = body - len(window)
            if len(rest) <= room:
                window += rest
                rest = []
            elif cuttable:
                window += rest[:room]
                rest = rest[room:]
                out.append(_closed(window, start, end, pad))
                window = []
            else:
                out.append(_closed(window, start, end, pad))
                window = []
    out.append(_closed(window, start, end, pad))
    return out


def _closed(window: list[Token], start: int, end: int, pad: int) -> list[Token]:
    closed = [(start, 1.0), *window, (end, 1.0)]
    return closed + [(pad, 1.0)] * (WINDOW - len(closed))


def tokenize(
    text: str, token_ids: Callable[[str], list[int]], start: int, end: int, pad: int
) -> list[list[Token]]:
    """A prompt as ComfyUI's CLIP tokenizer makes it: windows of (id, weight). `token_ids` is the
    tokenizer's ids of a piece without its start and end tokens."""
    pieces = [[(t, w) for t in token_ids(piece)] for piece, w in parse_weights(text) if piece]
    return windows(pieces, start, end, pad)


def empty_window(start: int, end: int, pad: int) -> list[int]:
    """The empty prompt's window (ComfyUI's `gen_empty_tokens`): what weights scale from."""
    return [start, end] + [pad] * (WINDOW - 2)
