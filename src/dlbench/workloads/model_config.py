"""A served model's shape from its transformers `config.json`: what its roofline counts.

An endpoint's model is the server's, not dlbench's: its decode bytes and prefill
FLOPs (workloads.decoder) come from the config the model ships with, given as
`--model-config FILE` or found beside `--tokenizer` (a model folder holds both).
The Llama family's keys name a dense decoder's shape in every such model (Llama,
Mistral, Qwen2, SmolLM, Phi-3...). A mixture of experts reads a share of its
weights per token, and a quantized checkpoint stores weights in a format its
config does not size: neither is counted, and the reason is said.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard

from dlbench.untyped import JSONValue
from dlbench.workloads.decoder import DecoderShape

CONFIG_FILE = "config.json"
# The config's dtype (transformers' `torch_dtype`, `dtype` since 4.56) -> dlbench's
# precision, whose ceilings hold the model's work
DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
# Keys that say the model is no dense decoder whose every weight each token reads
EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")
REQUIRED = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size",
            "vocab_size")  # fmt: skip


@dataclass(frozen=True)
class ModelConfig:
    """A dense decoder's shape and the precision its weights are stored in."""

    shape: DecoderShape
    precision: str
    source: str  # where it was read, for the reader


def read_model_config(path: Path, source: str) -> ModelConfig:
    """The config at `path` (a config.json, or the folder holding one); ValueError
    naming what is wrong, in one line."""
    file = path / CONFIG_FILE if path.is_dir() else path
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"no {CONFIG_FILE} at {path}") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{file} is not a readable JSON file ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{file} is not a JSON object (a transformers config.json)")
    return ModelConfig(dense_shape(data, file.name), config_precision(data), source)


def dense_shape(config: Mapping[str, JSONValue], name: str) -> DecoderShape:
    """A dense decoder's shape from a transformers config (text_config within a
    multimodal one)."""
    text = config.get("text_config")
    config = text if isinstance(text, dict) else config
    experts = [key for key in EXPERT_KEYS if config.get(key)]
    if experts:
        raise ValueError(f"{name}: a mixture of experts ({experts[0]}): the roofline counts "
                         "dense decoders, whose every weight each token reads")  # fmt: skip
    missing = [key for key in REQUIRED if not _whole(config.get(key))]
    if missing:
        raise ValueError(f"{name}: no {', '.join(missing)} (a positive whole number): not a "
                         f"decoder's config; allowed: {', '.join(REQUIRED)} and more")  # fmt: skip
    heads = int(config["num_attention_heads"])
    kv_heads = _whole_or_none(config.get("num_key_value_heads"))
    head_dim = _whole_or_none(config.get("head_dim"))
    return DecoderShape(
        layers=int(config["num_hidden_layers"]),
        hidden=int(config["hidden_size"]),
        heads=heads,
        kv_heads=kv_heads or heads,
        intermediate=int(config["intermediate_size"]),
        vocab=int(config["vocab_size"]),
        max_positions=int(config.get("max_position_embeddings") or 0),
        rope_theta=float(config.get("rope_theta") or 0.0),
        like=str(config.get("model_type") or "a config.json"),
        explicit_head_dim=head_dim,
    )


def config_precision(config: Mapping[str, JSONValue]) -> str:
    """The precision its weights are stored in; ValueError where the config gives none
    dlbench sizes (none at all, or a quantized checkpoint's)."""
    if config.get("quantization_config"):
        method = (config["quantization_config"] or {}).get("quant_method", "quantized")
        raise ValueError(f"a {method} checkpoint: its weights' bytes are not its config's dtype")
    dtype = config.get("torch_dtype") or config.get("dtype")
    text = config.get("text_config")
    if dtype is None and isinstance(text, dict):
        dtype = text.get("torch_dtype") or text.get("dtype")
    if dtype not in DTYPES:
        raise ValueError(f"the weights' dtype {dtype!r} is not one dlbench sizes; allowed: "
                         f"{', '.join(DTYPES)} (torch_dtype)")  # fmt: skip
    return DTYPES[str(dtype)]


def _whole(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _whole_or_none(value: object) -> int | None:
    return int(value) if _whole(value) else None
