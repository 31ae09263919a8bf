"""The llama.cpp engine's converter: the shared checkpoint written whole as fp32 GGUF, with
its rotary layout turned into llama.cpp's (the engine itself: test_worker_generation)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import cli, installed

gguf = pytest.importorskip("gguf")
pytest.importorskip("safetensors")

from dlbench.backends.llama_cpp.gguf_export import rope_pairs  # noqa: E402


def rotate_halves(q: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """transformers' Llama rotary embedding of one head: element i turns with i + d/2."""
    half = q.shape[0] // 2
    first, second = q[:half], q[half:]
    cos, sin = np.cos(angles), np.sin(angles)
    return np.concatenate([first * cos - second * sin, second * cos + first * sin])


def rotate_pairs(q: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """llama.cpp's Llama rotary embedding of one head: element 2i turns with 2i + 1."""
    even, odd = q[0::2], q[1::2]
    cos, sin = np.cos(angles), np.sin(angles)
    out = np.empty_like(q)
    out[0::2], out[1::2] = even * cos - odd * sin, even * sin + odd * cos
    return out


def test_reordered_rows_rotate_in_llama_cpps_layout_as_the_originals_do_in_transformers():
    heads, head_dim, hidden = 3, 8, 12
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((heads * head_dim, hidden))
    x = rng.standard_normal(hidden)
    angles = 5 * 10000.0 ** (-np.arange(head_dim // 2) * 2 / head_dim)  # position 5
    ours = (rope_pairs(weight, heads) @ x).reshape(heads, head_dim)
    theirs = (weight @ x).reshape(heads, head_dim)
    for head in range(heads):
        rotated = rotate_halves(theirs[head], angles)
        # the same rotated values, each half's element i now beside its partner
        expected = np.stack([rotated[: head_dim // 2], rotated[head_dim // 2 :]], axis=1)
        np.testing.assert_allclose(rotate_pairs(ours[head], angles), expected.reshape(-1))
    # the identity only where a head's halves were already interleaved: here they were not
    assert not np.allclose(rope_pairs(weight, heads), weight)


@installed("transformers")
@pytest.mark.integration
def test_the_checkpoint_is_written_whole_as_fp32_gguf():
    from safetensors.numpy import load_file

    from dlbench.backends.llama_cpp.gguf_export import CONVERTER, EXPORT, GGUF_FILE
    from dlbench.reference.decoder import checkpoint_folder, converted
    from dlbench.workloads.decoder import EOS_ID, SHAPES, SPECIAL_TOKENS

    shape = SHAPES["llm-tiny"]
    folder, meta = converted("llama-cpp", "llm-tiny", 0, EXPORT, CONVERTER)
    assert meta["converter"] == CONVERTER and meta["convert_s"] > 0
    reader = gguf.GGUFReader(folder / GGUF_FILE)
    weights = load_file(checkpoint_folder("llm-tiny", 0) / "model.safetensors")
    tensors = {t.name: t for t in reader.tensors}
    assert len(tensors) == len(weights) == 2 + shape.layers * 9 + 1
    assert all(t.tensor_type == gguf.GGMLQuantizationType.F32 for t in tensors.values())
    np.testing.assert_array_equal(
        tensors["blk.1.attn_q.weight"].data,
        rope_pairs(weights["model.layers.1.self_attn.q_proj.weight"], shape.heads),
    )
    np.testing.assert_array_equal(
        tensors["blk.0.attn_k.weight"].data,
        rope_pairs(weights["model.layers.0.self_attn.k_proj.weight"], shape.kv_heads),
    )
    np.testing.assert_array_equal(tensors["output.weight"].data, weights["lm_head.weight"])

    def field(key: str):
        return reader.fields[key].contents()

    assert field("general.architecture") == "llama"
    assert (field("llama.block_count"), field("llama.attention.head_count_kv")) == (
        shape.layers, shape.kv_heads,
    )  # fmt: skip
    assert field("llama.rope.freq_base") == shape.rope_theta
    tokens, types = field("tokenizer.ggml.tokens"), field("tokenizer.ggml.token_type")
    assert len(tokens) == shape.vocab and tokens[EOS_ID] == SPECIAL_TOKENS[EOS_ID]
    assert [types[i] for i in range(len(SPECIAL_TOKENS))] == [gguf.TokenType.CONTROL] * 3
    assert field("tokenizer.ggml.eos_token_id") == EOS_ID
    merges = json.loads((checkpoint_folder("llm-tiny", 0) / "tokenizer.json").read_text())
    assert len(field("tokenizer.ggml.merges")) == len(merges["model"]["merges"])


def test_a_conversion_is_made_again_when_its_converter_changes():
    from dlbench.backends.llama_cpp.gguf_export import CONVERTER, EXPORT
    from dlbench.reference.decoder import conversion_key

    key = conversion_key("llama-cpp", EXPORT, CONVERTER)
    assert key.startswith("llama-cpp-") and key == conversion_key("llama-cpp", EXPORT, CONVERTER)
    assert key != conversion_key("llama-cpp", [*EXPORT, "--another-option"], CONVERTER)
    assert key != conversion_key("llama-cpp", EXPORT, "another converter")
    # the interpreter's path is no part of it: the packages' versions are
    assert key == conversion_key("llama-cpp", ["another-python", *EXPORT[1:]], CONVERTER)


def test_llama_cpp_runs_one_sequence_at_a_time():
    done = cli("run", "--dry-run", "-w", "llm-tiny", "-f", "llama-cpp", "-b", "2")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "batch size 2 on 'llama-cpp': it runs at most 1 at once" in line
