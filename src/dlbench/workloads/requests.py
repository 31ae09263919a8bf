"""llm-requests: seeded synthetic requests for an OpenAI-compatible server (--endpoint).

A request set is a sequence of conversations, each made from the seed and its
index alone, so a run, a rerun and a peer tool given the same file send the same
text. Its parameters (all integers):

- isl, osl: prompt and output tokens per turn, on average;
- range_pct: each length drawn uniformly within +-range_pct % of its average
  (vLLM's random dataset's range ratio); 0: every request alike;
- prefix_pct, prefixes: that share of each first prompt is a prefix shared by the
  conversations of its group, one of `prefixes` groups (a system prompt, a
  document asked about: what a server's prefix cache is for);
- turns: each conversation's turns; a turn's prompt is the whole conversation so
  far (the earlier prompts and the server's answers) and a new message;
- unsalted: 1 sends the prompts as the seed makes them. By default each conversation's
  first prompt begins with a salt (SALT_TOKENS words drawn from the run's random salt
  and the conversation, or its prefix group where the workload shares a prefix by
  design), so a server's prefix cache that an earlier run warmed cannot serve this one,
  while the sharing the parameters design holds within the run. The salt is part of
  the prompt's length.

Prompt text is words of plain English. With the served model's tokenizer
(--tokenizer), a prompt is cut to exactly its length in that tokenizer's tokens;
without one, a word stands for a token (about right for the tokenizers of common
models), and the server's usage report gives the real count, recorded beside.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar, Protocol

from dlbench.errors import UserError
from dlbench.workloads.base import WeightDict, Workload

if TYPE_CHECKING:
    import numpy as np

# Common English words, each one token (with its leading space) in GPT-2's, Llama 3's
# and most BPE vocabularies: prompts of words are near their length in tokens.
WORD_TEXT = """
the of and to in is was for on that with as by at from his her it he she they we you
be this are or have had not but all were an which one their there been has more when
who will would no if out so said what up its about into than them can only other new
some could time these two may then do first any my now such like our over man me
even most made after also did many before must through back years where much your
way well down should because each just those people how too little state good very
make world still own see men work long get here between both life being under never
day same another know while last might us great old year off come since against go
came right used take three place small found part house school high water city name
point number book room hand light order line play sound word read question answer
market table paper music river garden window story power summer morning system
program report model result data value field group figure study level area
"""
WORDS = tuple(WORD_TEXT.split())
TOKENIZER_FILE = "tokenizer.json"
MAX_TURNS = 64
MAX_PREFIXES = 1_000_000
# Words of salt a first prompt begins with (at most half its length): one of about
# 10**10 sequences, so two runs' salts of a conversation all but never meet
SALT_TOKENS = 4
# The random streams of numpy's generator, by what they make (a conversation's own
# stream is [seed, warm-up, index])
PREFIX_STREAM, SALT_STREAM = 2, 3


@dataclass(frozen=True)
class Turn:
    text: str  # the new user message
    tokens: int  # its length asked for (in the tokenizer's tokens, or in words)
    output_tokens: int  # max_tokens (the server is asked to give exactly these)


@dataclass(frozen=True)
class Conversation:
    index: int
    turns: tuple[Turn, ...]
    prefix_group: int | None = None


class PromptText(Protocol):
    """Makes prompt text of a length, and counts an answer's tokens where it can."""

    sized_by: str

    def make(self, rng: np.random.Generator, tokens: int) -> str: ...

    def count(self, text: str) -> int | None: ...


class WordText:
    sized_by = "words (a word stands for a token)"

    def make(self, rng: np.random.Generator, tokens: int) -> str:
        return " ".join(WORDS[i] for i in rng.integers(0, len(WORDS), size=tokens))

    def count(self, text: str) -> int | None:
        return None


class TokenizerText:
    """Prompts cut to a length in the served model's own tokens (a tokenizers file)."""

    sized_by = "the tokenizer"

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(tokenizer_file(path)))

    def make(self, rng: np.random.Generator, tokens: int) -> str:
        words = WordText().make(rng, tokens + 8)  # a word is one token or more
        ids = self._tokenizer.encode(words, add_special_tokens=False).ids[:tokens]
        return self._tokenizer.decode(ids)

    def count(self, text: str) -> int | None:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)


def prompt_text(tokenizer: str | None) -> PromptText:
    """The text an endpoint's prompts are made of: --tokenizer's tokens, else words (the
    run's and the check before it, launch.endpoint_probe, alike)."""
    return TokenizerText(Path(tokenizer)) if tokenizer else WordText()


def tokenizer_file(path: Path) -> Path:
    """The tokenizer.json a --tokenizer path names: the file, or the one in its folder."""
    return path / TOKENIZER_FILE if path.is_dir() else path


def new_salt() -> str:
    """A run's salt: 32 random bits, as hex."""
    return secrets.token_hex(4)


class RequestSet:
    """The conversations of a run, each made from (seed, index) alone, and the run's
    salt where it has one (None: the params say unsalted)."""

    def __init__(self, params: Mapping[str, int], seed: int, text: PromptText,
                 salt: str | None = None) -> None:  # fmt: skip
        # the parameters left off (0) are absent from a resolved case's
        self.params = {**dict.fromkeys(LlmRequests.cpu_params, 0), **params}
        self.seed, self.text = seed, text
        self.salt = None if self.params["unsalted"] else salt

    def conversation(self, index: int, warmup: bool = False) -> Conversation:
        """Conversation `index` (warm-up ones are a stream of their own)."""
        import numpy as np

        p = self.params
        rng = np.random.default_rng([self.seed, int(warmup), index])
        group = index % p["prefixes"] if p["prefix_pct"] else None
        turns = []
        for turn in range(p["turns"]):
            isl, osl = _drawn(rng, p["isl"], p["range_pct"]), _drawn(rng, p["osl"], p["range_pct"])
            if turn:
                turns.append(Turn(self.text.make(rng, isl), isl, osl))
                continue
            shared = round(p["isl"] * p["prefix_pct"] / 100) if group is not None else 0
            salted = min(SALT_TOKENS, isl // 2, shared if shared else isl) if self.salt else 0
            # the salt of a group's prefix is the group's (the design shares it); else
            # the conversation's own, so that it adds no sharing of its own
            unit = [0, group] if shared else [1 + int(warmup), index]
            parts = [
                self._salt(unit, salted),
                self._prefix(group, shared - salted) if shared else "",
                self.text.make(rng, max(1, isl - max(shared, salted))),
            ]
            turns.append(Turn(" ".join(part for part in parts if part), max(1, isl), osl))
        return Conversation(index, tuple(turns), group)

    def _prefix(self, group: int | None, tokens: int) -> str:
        import numpy as np

        rng = np.random.default_rng([self.seed, PREFIX_STREAM, group or 0])
        return self.text.make(rng, tokens) if tokens > 0 else ""

    def _salt(self, unit: Sequence[int | None], tokens: int) -> str:
        import numpy as np

        if self.salt is None or tokens <= 0:
            return ""
        rng = np.random.default_rng([int(self.salt, 16), SALT_STREAM, *(u or 0 for u in unit)])
        return self.text.make(rng, tokens)


def _drawn(rng: np.random.Generator, mean: int, range_pct: int) -> int:
    """A length uniform within +-range_pct % of `mean`, at least 1."""
    if not range_pct:
        return mean
    spread = mean * range_pct / 100
    return max(1, int(rng.integers(round(mean - spread), round(mean + spread) + 1)))


class LlmRequests(Workload):
    name = "llm-requests"
    description = (
        "seeded synthetic requests to an OpenAI-compatible server (--endpoint URL): lengths, "
        "shared prefixes, multi-turn"
    )
    modes = ("infer",)
    cpu_params: ClassVar[Mapping[str, int]] = MappingProxyType(
        dict(isl=128, osl=32, range_pct=0, prefix_pct=0, prefixes=1, turns=1, unsalted=0)
    )
    gpu_params = cpu_params
    primary_metric = "gflops"  # none: the server's model is unknown here

    def resolve_params(self, device: str, given: Mapping[str, int]) -> dict[str, int]:
        """The defaults and the given, without the features left off (0): a case's label
        and stored parameters name only what its requests have."""
        return {k: v for k, v in super().resolve_params(device, given).items() if v}

    def validate_params(self, given: Mapping[str, int]) -> None:
        super().validate_params(given)
        params = {**self.cpu_params, **given}
        for name, most in (("range_pct", 99), ("prefix_pct", 99), ("turns", MAX_TURNS),
                           ("prefixes", MAX_PREFIXES), ("unsalted", 1)):  # fmt: skip
            if params[name] > most:
                raise UserError(
                    f"workload {self.name!r} parameter {name}={params[name]}; allowed: up to {most}"
                )

    def flops_per_sample(self, params: Mapping[str, int], mode: str) -> float:
        return 0.0  # the server's model is unknown to the client

    def input_bytes_per_sample(self, params: Mapping[str, int], mode: str) -> float:
        return 0.0  # prompts are made as they are sent

    def make_inputs(self, batch_size: int, params: Mapping[str, int], mode: str,
                    seed: int) -> WeightDict:  # fmt: skip
        return {}  # RequestSet makes the requests, one conversation at a time


LLM_REQUESTS = LlmRequests()
