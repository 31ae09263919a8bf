"""Writes a transformers Llama checkpoint folder as one fp32 GGUF file: `python -m` this module.

llama.cpp's own converter (convert_hf_to_gguf.py) ships with its source tree,
not with llama-cpp-python or the `gguf` package, so the conversion is written
here on the `gguf` package's pieces: GGUFWriter, the tensor name map and the
BPE vocabulary reader. What is done by hand is what only the converter script
knows:
- llama.cpp's Llama rotates adjacent pairs of each head's query and key rows,
  where transformers rotates the first half against the second, so the rows of
  q_proj and k_proj are reordered (see `rope_pairs`);
- the tokenizer's special tokens are marked as control tokens.
Every tensor is written at fp32, the precision the token check compares.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path

import gguf
import numpy as np
from safetensors import safe_open

from dlbench.untyped import JSONValue

GGUF_FILE = "model-f32.gguf"
# Bump when what this module writes changes: the converter's name is part of the
# conversion's cache key (reference.decoder.conversion_key), and this module is dlbench's.
WRITER_REVISION = 1
# How dlbench.reference.decoder.converted runs it, and what the result records
EXPORT = [sys.executable, "-m", "dlbench.backends.llama_cpp.gguf_export", "{checkpoint}", "{out}"]
CONVERTER = f"gguf GGUFWriter (fp32; dlbench's writer, revision {WRITER_REVISION})"


def rope_pairs(weight: np.ndarray, heads: int) -> np.ndarray:
    """Rows of a q or k projection reordered from halves to adjacent pairs, per head.

    Row j of a head's first half and row j of its second half form one rotated pair
    in transformers; llama.cpp expects them as rows 2j and 2j + 1."""
    rows, columns = weight.shape
    per_head = weight.reshape(heads, 2, rows // heads // 2, columns)
    return np.ascontiguousarray(per_head.swapaxes(1, 2).reshape(rows, columns))


def rope_theta(config: Mapping[str, JSONValue]) -> float:
    """The rope base, from transformers 5's `rope_parameters` or 4's `rope_theta`."""
    rope: Mapping[str, JSONValue] = (
        config.get("rope_parameters") or config.get("rope_scaling") or {}
    )
    kind = rope.get("rope_type", rope.get("type", "default"))
    if kind != "default":
        raise SystemExit(f"rope type {kind!r} is not converted here; only the default rope is")
    return float(rope.get("rope_theta", config.get("rope_theta", 10000.0)))


def write_hyperparameters(writer: gguf.GGUFWriter, config: Mapping[str, JSONValue]) -> None:
    heads = config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    if head_dim * heads != config["hidden_size"]:
        # llama.cpp would need key_length and value_length; no workload has such a shape
        raise SystemExit(f"head_dim {head_dim} x {heads} heads is not the hidden size")
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(config.get("num_key_value_heads", heads))
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(rope_theta(config))
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_vocab_size(config["vocab_size"])
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)


def write_tokenizer(writer: gguf.GGUFWriter, folder: Path, vocab_size: int) -> None:
    """The byte-level BPE vocabulary, its merges and special ids, as llama.cpp's gpt2 model."""
    described = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    if (described.get("pre_tokenizer") or {}).get("type") != "ByteLevel":
        raise SystemExit("only a ByteLevel pre-tokenizer (GPT-2's split pattern) is converted")
    vocab = gguf.BpeVocab(folder)
    tokens, types = [], []
    for text, _score, kind in vocab.all_tokens():
        tokens.append(text)
        types.append(kind)
    if len(tokens) != vocab_size:
        raise SystemExit(f"the tokenizer has {len(tokens)} tokens, the model {vocab_size}")
    for token in described["added_tokens"]:
        if token.get("special"):
            types[token["id"]] = gguf.TokenType.CONTROL
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")  # ByteLevel with GPT-2's split pattern
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    special_vocab = gguf.SpecialVocab(folder, load_merges=True, n_vocab=vocab_size)
    special_vocab.add_special_token["bos"] = False  # prompts are token ids, given whole
    special_vocab.add_to_gguf(writer, quiet=True)


def write_tensors(writer: gguf.GGUFWriter, folder: Path, config: Mapping[str, JSONValue]) -> None:
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads", heads)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config["num_hidden_layers"])
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise SystemExit(f"no .safetensors weights in {folder.name}")
    for path in files:
        with safe_open(path, framework="numpy") as weights:
            for name in weights.keys():  # noqa: SIM118 (safe_open is not iterable)
                if name.endswith("rotary_emb.inv_freq"):
                    continue  # recomputed by every engine from the rope base
                target = names.get_name(name, try_suffixes=(".weight", ".bias"))
                if target is None:
                    raise SystemExit(f"no GGUF name for the checkpoint's tensor {name!r}")
                tensor = weights.get_tensor(name).astype(np.float32)
                if name.endswith("q_proj.weight"):
                    tensor = rope_pairs(tensor, heads)
                elif name.endswith("k_proj.weight"):
                    tensor = rope_pairs(tensor, kv_heads)
                writer.add_tensor(target, tensor)


def export(checkpoint: Path, out: Path) -> Path:
    config = json.loads((checkpoint / "config.json").read_text(encoding="utf-8"))
    if config.get("model_type") != "llama":
        raise SystemExit(f"model_type {config.get('model_type')!r}: only llama is converted here")
    out.mkdir(parents=True, exist_ok=True)
    path = out / GGUF_FILE
    writer = gguf.GGUFWriter(path, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.LLAMA])
    writer.add_name(checkpoint.name)
    write_hyperparameters(writer, config)
    write_tokenizer(writer, checkpoint, config["vocab_size"])
    write_tensors(writer, checkpoint, config)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="write a Llama checkpoint folder as fp32 GGUF")
    parser.add_argument("checkpoint", type=Path, help="transformers' folder (config, safetensors)")
    parser.add_argument("out", type=Path, help="the folder to write the GGUF file into")
    args = parser.parse_args(argv)
    export(args.checkpoint, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
