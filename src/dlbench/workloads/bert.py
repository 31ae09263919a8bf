"""BERT-family encoders built from a config with seeded random weights.

Nothing is downloaded: the architecture is a transformers config and the
weights come from torch's initialiser under the case's seed. Inputs are
random token ids of a fixed sequence length with a full attention mask.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

from dlbench.workloads.base import WeightDict, Workload, training_flops


@dataclass(frozen=True)
class EncoderShape:
    layers: int
    hidden: int
    heads: int
    intermediate: int
    vocab: int
    family: str  # "bert" or "distilbert"


SHAPES = {
    "bert-base": EncoderShape(12, 768, 12, 3072, 28996, "bert"),  # bert-base-cased
    "bert-large": EncoderShape(24, 1024, 16, 4096, 28996, "bert"),  # bert-large-cased
    "distilbert": EncoderShape(6, 768, 12, 3072, 30522, "distilbert"),  # distilbert-base-uncased
}


MASKED_FRACTION = 0.15
IGNORE_INDEX = -100


def encoder_flops(shape: EncoderShape, seq: int) -> float:
    """Per sequence: projections and FFN (24 s h^2 per layer) plus attention (4 s^2 h)."""
    per_layer = 24.0 * seq * shape.hidden**2 + 4.0 * seq * seq * shape.hidden
    return shape.layers * per_layer


class EncoderWorkload(Workload):
    # Training is masked-LM pretraining: the encoder plus its prediction head.
    modes = ("infer", "train")
    torch_scriptable = False  # transformers models are traced, not scripted
    int8_agreement = "cosine"  # hidden states, not classes
    transformer = True
    cpu_params: ClassVar[Mapping[str, int]] = MappingProxyType({"seq": 128})
    gpu_params: ClassVar[Mapping[str, int]] = MappingProxyType({"seq": 128})
    cpu_batch_size = 8
    # NVIDIA DeepLearningExamples' per-GPU pretraining batches: 256 sequences at
    # sequence 128 (phase 1) and 32 at 512 (phase 2). A smaller batch keeps an H100
    # waiting for its host (BERT-large at 32: 406 samples/s, NVML busy 51-74%).
    gpu_batch_size = 256
    gpu_long_batch_size = 32
    long_sequence = 512
    loss = "mlm"
    optimizer = "adamw"
    learning_rate = 1e-4

    @property
    def shape(self) -> EncoderShape:
        return SHAPES[self.name]

    def default_batch_size(self, device: str, params: Mapping[str, int] | None = None) -> int:
        """On a GPU, DeepLearningExamples' phase-2 batch from sequence 512 on, else
        phase 1's (the tokens per step, and the activations, stay within one GPU)."""
        seq = (params or {}).get("seq", 0)
        if device != "cpu" and seq >= self.long_sequence:
            return self.gpu_long_batch_size
        return super().default_batch_size(device, params)

    def flops_per_sample(self, params: Mapping[str, int], mode: str) -> float:
        forward = encoder_flops(self.shape, params["seq"])
        if mode == "train":
            # the masked-LM head: a hidden-size transform and the vocabulary
            # projection, at every position (transformers computes all of them)
            h = self.shape.hidden
            forward += 2.0 * params["seq"] * (h * h + h * self.shape.vocab)
        return training_flops(forward, mode)

    def input_bytes_per_sample(self, params: Mapping[str, int], mode: str) -> float:
        # int64 token ids and attention mask, and int64 labels in training
        return 8.0 * params["seq"] * (3 if mode == "train" else 2)

    def make_inputs(
        self, batch_size: int, params: Mapping[str, int], mode: str, seed: int
    ) -> WeightDict:
        import numpy as np

        rng = np.random.default_rng(seed + 1)
        shape = (batch_size, params["seq"])
        inputs = {
            "input_ids": rng.integers(0, self.shape.vocab, size=shape).astype(np.int64),
            "attention_mask": np.ones(shape, dtype=np.int64),
        }
        if mode == "train":
            # BERT's recipe: predict 15% of the positions; -100 marks the rest
            # (cross-entropy's ignore_index), so they add no loss.
            masked = rng.random(shape) < MASKED_FRACTION
            labels = np.where(masked, inputs["input_ids"], IGNORE_INDEX)
            inputs["labels"] = labels.astype(np.int64)
        return inputs


class BertBase(EncoderWorkload):
    name = "bert-base"
    description = "BERT base cased (12 layers, 768 hidden, 110M params), random weights"
    parameter_count = 107_719_680  # the encoder without a head


class BertLarge(EncoderWorkload):
    name = "bert-large"
    description = "BERT large cased (24 layers, 1024 hidden, 335M params), random weights"
    parameter_count = 332_529_664
    cpu_batch_size = 4


class DistilBert(EncoderWorkload):
    name = "distilbert"
    description = "DistilBERT base (6 layers, 768 hidden, 66M params), random weights"
    parameter_count = 66_362_880


BERT_BASE, BERT_LARGE, DISTILBERT = BertBase(), BertLarge(), DistilBert()
