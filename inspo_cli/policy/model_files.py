"""Reading a model directory's small files, checked, before transformers loads it.

transformers and safetensors meet a damaged model directory with a traceback deep inside the load (or, for a FIFO
named model.safetensors, hang), after minutes of other work. These read what can be read cheaply (config.json, the
tokenizer's JSON files, the chat template and each safetensors header, never the weights), bounded, and say in a
phrase what is wrong (`model_files_problem`); `inspo_cli.policy.models` calls it before every load.
"""

from __future__ import annotations

import json
import math
import os
import struct
import zipfile
from pathlib import Path

from inspo_cli.errors import InspoError
from inspo_cli.files import open_regular
from inspo_cli.jsonio import Range, shape_problem

ADAPTER_CONFIG = "adapter_config.json"  # PEFT's: a directory holding a LoRA adapter, not a whole model

CONFIG_BYTES = 16 << 20  # a config.json is kilobytes
SAFETENSORS_HEADER_BYTES = 100_000_000  # the safetensors library's own limit on a header
TOKENIZER_FILE_BYTES = 256 << 20  # tokenizer.json is 2-35 MB for today's vocabularies
TOKENIZER_JSON = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "generation_config.json",
)  # what transformers reads besides config.json and the weights
CHAT_TEMPLATE = "chat_template.jinja"
CONFIG_SIZES = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "max_position_embeddings",
    "head_dim",
)  # what transformers allocates by
DTYPE_BYTES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E5M2": 1,
    "F8_E4M3": 1,
    "F8_E8M0": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
    "C64": 8,
}


class _Unusable(Exception):
    """Why a model file cannot be used, as a phrase naming the file."""


def _open_model_file(file: Path):
    try:
        return open_regular(file, file.name)
    except InspoError:
        raise _Unusable(f"{file.name} is not a regular file") from None
    except OSError as e:
        raise _Unusable(f"{file.name} cannot be read ({e.strerror or e})") from None


def _small_file(file: Path, limit: int) -> bytes:
    """A model directory's small file, read to at most `limit` bytes (counted as read: a FIFO or device lies)."""
    with _open_model_file(file) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise _Unusable(f"{file.name} is more than {limit:,} bytes (not a model's {file.name})")
    return data


def _json_file(file: Path, limit: int) -> object:
    data = _small_file(file, limit)
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _Unusable(f"{file.name} is cut short or corrupt (not valid JSON)") from None


def _config_problem(file: Path) -> None:
    """config.json (or adapter_config.json): a JSON object whose sizes, where given, are positive integers."""
    size = (Range(1, 2**31 - 1, integer=True), None)
    shape = {**{f"{key}?": size for key in CONFIG_SIZES}, "*": object} if file.name == "config.json" else dict
    if (problem := shape_problem(_json_file(file, CONFIG_BYTES), shape)) is not None:
        raise _Unusable(f"{file.name}: {problem}")


def safetensors_header(file: Path) -> dict:
    """The header of a .safetensors file, checked as the safetensors library will check it at load: a JSON object
    of tensors with a known dtype, a shape and data offsets that tile the data exactly, and a file of exactly
    8 + header + data bytes. Raises `_Unusable` naming the file."""
    with _open_model_file(file) as f:
        size, head = os.fstat(f.fileno()).st_size, f.read(8)
        length = struct.unpack("<Q", head)[0] if len(head) == 8 else size
        raw = f.read(length) if 8 + length <= min(size, 8 + SAFETENSORS_HEADER_BYTES) else b""  # b"": not JSON
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _Unusable(f"{file.name} is cut short or corrupt (its header cannot be read)") from None
    if not isinstance(header, dict):
        raise _Unusable(f"{file.name} is corrupt (its header is not a JSON object)")
    spans = []
    for name, entry in header.items():
        if name == "__metadata__":
            if not isinstance(entry, dict) or not all(isinstance(v, str) for v in entry.values()):
                raise _Unusable(f"{file.name} is corrupt (its __metadata__ is not an object of strings)")
            continue
        spans.append((*_tensor_span(file, name, entry), name))
    end = 0
    for begin, stop, name in sorted(spans):
        if begin != end:
            raise _Unusable(
                f"{file.name} is corrupt (tensor {name!r} starts at byte {begin:,} of its data, not "
                f"{end:,}: its offsets overlap or leave a gap)"
            )
        end = stop
    if size < 8 + length + end:
        raise _Unusable(f"{file.name} is cut short ({size} bytes of {8 + length + end})")
    if size > 8 + length + end:
        raise _Unusable(f"{file.name} is corrupt ({size - 8 - length - end:,} bytes after its last tensor)")
    return header


def _tensor_span(file: Path, name: str, entry: object) -> tuple[int, int]:
    def integers(value, count=None):
        return (
            isinstance(value, list)
            and (count is None or len(value) == count)
            and all(type(v) is int and v >= 0 for v in value)
        )

    if not (
        isinstance(entry, dict)
        and isinstance(entry.get("dtype"), str)
        and integers(entry.get("shape"))
        and integers(entry.get("data_offsets"), 2)
        and entry["data_offsets"][0] <= entry["data_offsets"][1]
    ):
        raise _Unusable(f"{file.name} is corrupt (tensor {name!r} has no valid dtype, shape and data_offsets)")
    begin, stop = entry["data_offsets"]
    width = DTYPE_BYTES.get(entry["dtype"])
    if width is not None and stop - begin != math.prod(entry["shape"]) * width:
        raise _Unusable(
            f"{file.name} is corrupt (tensor {name!r}: {stop - begin:,} bytes for shape "
            f"{entry['shape']} of {entry['dtype']})"
        )
    return begin, stop


def _token_ids_problem(name: str, data: object) -> None:
    """A JSON object whose *_token_id entries are token ids (generate() fails on a NaN one, deep in torch)."""
    if not isinstance(data, dict):
        raise _Unusable(f"{name} is corrupt (not a JSON object)")
    for key, value in data.items():
        ids = value if isinstance(value, list) else [value]
        if key.endswith("_token_id") and value is not None and not all(type(i) is int and i >= 0 for i in ids):
            raise _Unusable(f"{name} is corrupt ({key} is {str(value)[:40]}, not a token id)")


def _template_problem(file: Path) -> None:
    """chat_template.jinja: UTF-8 text that parses as a Jinja template (transformers compiles it at first use)."""
    import jinja2

    data = _small_file(file, CONFIG_BYTES)
    try:
        if b"\0" in data:
            raise ValueError("not text")
        jinja2.Environment(extensions=["jinja2.ext.loopcontrols"]).parse(data.decode("utf-8"))
    except (ValueError, jinja2.TemplateError):  # UnicodeDecodeError is a ValueError
        raise _Unusable(f"{file.name} is cut short or corrupt (not a Jinja template of UTF-8 text)") from None


def model_files_problem(path: Path) -> str | None:
    """Why the model files in `path` cannot be loaded (no weights, config.json, a tokenizer file, the chat template
    or a safetensors header damaged, a weights file cut short or not a regular file), or None; reads those small
    files and the headers, never the weights."""
    path = Path(path)
    try:
        for name in ("config.json", ADAPTER_CONFIG):
            if (path / name).exists():
                _config_problem(path / name)
        for name in TOKENIZER_JSON:  # read unchecked by transformers: a traceback, or 3 GB read whole
            if os.path.lexists(path / name):
                _token_ids_problem(name, _json_file(path / name, TOKENIZER_FILE_BYTES))
        if os.path.lexists(path / CHAT_TEMPLATE):
            _template_problem(path / CHAT_TEMPLATE)
        weights = sorted(path.glob("*.safetensors"))
        bins = [*path.glob("pytorch_model*.bin"), *path.glob("adapter_model.bin")]  # not training_args.bin
        if not weights and not bins and not any(path.glob("global_step*")):
            return "no model weights (*.safetensors)"
        for file in weights:
            safetensors_header(file)
        for file in [*path.glob("*.pt"), *path.glob("*.pth")]:
            with _open_model_file(file) as f:
                if not zipfile.is_zipfile(f):
                    return f"{file.name} is cut short or corrupt"
    except _Unusable as unusable:
        return str(unusable)
    return None
