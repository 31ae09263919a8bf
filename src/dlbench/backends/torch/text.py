"""BERT-family encoders (transformers, built from a config: nothing downloaded)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from dlbench.workloads.bert import SHAPES

if TYPE_CHECKING:  # imported where a model is built: a worker that builds none skips it
    from transformers import BertConfig, DistilBertConfig


class EncoderOutput(nn.Module):
    """Wraps a transformers encoder so it takes tensors and returns one tensor.

    Returning last_hidden_state (not a ModelOutput) keeps the module
    exportable and traceable, and gives every framework one array to check.
    """

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def _config(workload: str) -> DistilBertConfig | BertConfig:
    """The transformers config of a workload's shape: a DistilBERT's or a BERT's."""
    import transformers

    shape = SHAPES[workload]
    if shape.family == "distilbert":
        return transformers.DistilBertConfig(
            vocab_size=shape.vocab,
            n_layers=shape.layers,
            dim=shape.hidden,
            n_heads=shape.heads,
            hidden_dim=shape.intermediate,
        )
    return transformers.BertConfig(
        vocab_size=shape.vocab,
        num_hidden_layers=shape.layers,
        hidden_size=shape.hidden,
        num_attention_heads=shape.heads,
        intermediate_size=shape.intermediate,
    )


def encoder(workload: str) -> nn.Module:
    """A randomly initialised encoder (seed it with torch.manual_seed first)."""
    import transformers

    config = _config(workload)
    if isinstance(config, transformers.DistilBertConfig):
        return EncoderOutput(transformers.DistilBertModel(config))
    return EncoderOutput(transformers.BertModel(config, add_pooling_layer=False))


class MaskedLmLogits(nn.Module):
    """An encoder with its masked-LM head, returning the logits tensor (for the loss)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits


def masked_lm(workload: str) -> nn.Module:
    """The encoder with a masked-LM head, randomly initialised (pretraining, as BERT's)."""
    import transformers

    config = _config(workload)
    if isinstance(config, transformers.DistilBertConfig):
        return MaskedLmLogits(transformers.DistilBertForMaskedLM(config))
    return MaskedLmLogits(transformers.BertForMaskedLM(config))
