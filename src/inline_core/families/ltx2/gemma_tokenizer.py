"""Gemma's tokenizer from the SentencePiece model ComfyUI's Gemma file carries (`spiece_model`:
uint8 bytes of Gemma's `tokenizer.model`), as transformers' `GemmaTokenizer` (torch-free).

transformers converts a `tokenizer.model` only through protobuf, which this server does not need
otherwise; the conversion here is the same one (transformers' `GemmaConverter`): the pieces in
their order, BPE merges ranked by the pieces' scores, byte fallback, control pieces as special
tokens and user-defined ones as whole tokens. The piece types are read from the model's bytes
(`piece_types`, protobuf's wire format, three fields). Plain text tokenizes as SentencePiece does
(what ComfyUI runs); control tokens written in a prompt are read as the folder's tokenizer reads
them, as one token.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, cast

from inline_core.diffusion.libs import module
from inline_core.families.ltx2 import gemma_keys
from inline_core.families.ltx2.request import MAX_PROMPT_TOKENS

CONTROL, USER_DEFINED = 3, 4  # SentencePiece's piece types (NORMAL is 1, and the default)
PIECES, PIECE_TYPE = 1, 3  # ModelProto.pieces; SentencePiece.type
VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int, int | bytes]]:
    """(field, wire type, value) of one protobuf message, in order."""
    out: list[tuple[int, int, int | bytes]] = []
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        field, wire = key >> 3, key & 7
        value: int | bytes
        if wire == VARINT:
            value, at = _varint(data, at)
        elif wire == LENGTH:
            size, at = _varint(data, at)
            value, at = data[at : at + size], at + size
        elif wire in (FIXED32, FIXED64):
            size = 4 if wire == FIXED32 else 8
            value, at = data[at : at + size], at + size
        else:
            raise ValueError(f"not a SentencePiece model (wire type {wire} at byte {at})")
        out.append((field, wire, value))
    return out


def piece_types(model: bytes) -> list[int]:
    """Each piece's type, in id order (a piece that states none is NORMAL)."""
    types: list[int] = []
    for field, wire, value in _fields(model):
        if field == PIECES and wire == LENGTH and isinstance(value, bytes):
            kinds = [v for f, w, v in _fields(value) if f == PIECE_TYPE and w == VARINT]
            types.append(int(kinds[-1]) if kinds else 1)
    return types


def from_spiece(model: bytes, max_length: int = MAX_PROMPT_TOKENS) -> Any:
    """A `GemmaTokenizer` of the SentencePiece model `model` (left padding, a BOS first)."""
    spm: Any = importlib.import_module("sentencepiece")
    sp = spm.SentencePieceProcessor(model_proto=model)
    size = int(sp.get_piece_size())
    pieces = [str(sp.id_to_piece(i)) for i in range(size)]
    vocab = {piece: i for i, piece in enumerate(pieces)}
    if "\t" not in vocab and "<0x09>" in vocab:  # as transformers' converter: tab as a merge
        vocab["\t"] = vocab["<0x09>"]
    scores = {piece: float(sp.get_score(i)) for i, piece in enumerate(pieces)}
    base = module("transformers.tokenization_utils_base")
    merges = base.generate_merges(vocab, scores)
    types = piece_types(model)
    if len(types) != size:
        raise ValueError(f"the SentencePiece model lists {len(types)} pieces of {size}")
    named = {
        "unk_token": pieces[int(sp.unk_id())],
        "bos_token": pieces[int(sp.bos_id())],
        "eos_token": pieces[int(sp.eos_id())],
        "pad_token": pieces[int(sp.pad_id())] if int(sp.pad_id()) >= 0 else None,
    }
    tokenizer = module("transformers").GemmaTokenizer(
        vocab=vocab,
        merges=merges,
        mask_token=None,
        add_bos_token=True,
        add_eos_token=False,
        padding_side="left",
        model_max_length=max_length,
        **named,
    )
    added = module("tokenizers").AddedToken
    tokenizer.add_tokens(
        [
            added(piece, normalized=False, special=kind == CONTROL)
            for piece, kind in zip(pieces, types, strict=True)
            if kind in (CONTROL, USER_DEFINED) and piece not in named.values()
        ]
    )
    return tokenizer


def file_tokenizer(path: Path) -> Any:
    """The tokenizer ComfyUI's Gemma file `path` carries."""
    st = cast(Any, importlib.import_module("safetensors"))
    with st.safe_open(str(path), framework="numpy") as f:
        data = bytes(f.get_tensor(gemma_keys.TOKENIZER_KEY).tobytes())
    return from_spiece(data)
