"""Text generation served to requests that arrive at their own times (the LLM server
scenario, worker.token_serving).

A ServingEngine takes requests (a prompt, a number of output tokens) as they come
and tells a TokenSink when each request's first token exists and when its last
does. How requests share the engine is the engine's, and is recorded:

- GeneratorStreams, for an engine with no scheduler of its own: `streams` threads,
  each with its own loaded Generator, sleep on one queue and serve a request at a
  time, as a plain transformers `generate` and onnxruntime-genai's Generator must;
- a continuous-batching engine adds each request to its running batch at the next
  step: openvino-genai's ContinuousBatchingPipeline (backends.openvino_genai.serving),
  llama.cpp's parallel slots (backends.llama_cpp.slots).

Nothing waits by spinning: idle threads sleep on a queue.
"""

from __future__ import annotations

import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Protocol

from dlbench.results.details import Details

if TYPE_CHECKING:
    import numpy as np


class TokenSink(Protocol):
    """Where an engine reports its requests (worker.token_sut: LoadGen's callbacks)."""

    def first_token(self, request_id: int) -> None: ...

    def finished(self, request_id: int, tokens: list[int], token_times_s: list[float]) -> None: ...

    def failed(self, request_id: int, error: BaseException) -> None: ...


class TokenTrace(Protocol):
    """backends.base.GenerationTrace as a stream reads it."""

    @property
    def tokens(self) -> Sequence[Sequence[int]]: ...  # [batch][osl]
    @property
    def token_times_s(self) -> Sequence[float]: ...


class FirstTokenGenerator(Protocol):
    """backends.base.Generator as a stream uses it (named by its shape: base makes
    the streams, so this module does not import it)."""

    def generate(
        self, prompt_ids: np.ndarray, osl: int, on_first_token: Callable[[], None] | None = None
    ) -> TokenTrace: ...


@dataclass(frozen=True)
class Request:
    request_id: int
    prompt: Sequence[int]
    osl: int


class ServingEngine(ABC):
    """An engine serving requests concurrently; `start` before the first `submit`."""

    details: Details
    device: str
    batching: str  # how concurrent requests share the engine, in words (recorded)

    @abstractmethod
    def start(self, sink: TokenSink) -> None:
        """Begin serving; the sink hears of every request submitted after."""

    @abstractmethod
    def submit(self, request: Request) -> None:
        """Queue a request; returns at once (the sink hears of it later)."""

    @abstractmethod
    def close(self) -> None:
        """Finish the requests under way, then stop."""


class SteppingEngine(ServingEngine):
    """An engine one thread owns and steps (a continuous-batching scheduler): requests
    arrive on a queue, and the thread takes them in between its steps."""

    thread_name = "serving-engine"

    def __init__(self) -> None:
        self._arrivals: queue.SimpleQueue[Request | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def start(self, sink: TokenSink) -> None:
        self._thread = threading.Thread(
            target=self._serve, args=(sink,), daemon=True, name=self.thread_name
        )
        self._thread.start()

    def submit(self, request: Request) -> None:
        self._arrivals.put(request)

    def close(self) -> None:
        if self._thread is not None:
            self._arrivals.put(None)  # the thread finishes what runs, then ends
            self._thread.join()
            self._thread = None
        self._release()

    def _release(self) -> None:
        """Free what the engine holds outside Python, once its thread has ended."""

    @abstractmethod
    def _serve(self, sink: TokenSink) -> None:
        """The owning thread: take arrivals, step, report tokens, until close()."""

    def _arrived(self, wait: bool) -> tuple[list[Request], bool]:
        """The requests that arrived (sleeping on the queue for one if `wait`), and
        whether close() was asked."""
        try:
            item = self._arrivals.get() if wait else self._arrivals.get_nowait()
        except queue.Empty:
            return [], False
        arrived = []
        while item is not None:
            arrived.append(item)
            try:
                item = self._arrivals.get_nowait()
            except queue.Empty:
                return arrived, False
        return arrived, True


class GeneratorStreams(ServingEngine):
    """`streams` generators, each serving one request at a time on a thread of its own."""

    def __init__(
        self, generators: Sequence[FirstTokenGenerator], device: str, details: Details
    ) -> None:
        self._generators = list(generators)
        self.device, self.details = device, details
        count = len(self._generators)
        self.batching = (
            f"{count} stream{'s' if count != 1 else ''}, one request at a time each "
            "(no continuous batching in this engine)"
        )
        self._queue: queue.SimpleQueue[Request | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []

    def start(self, sink: TokenSink) -> None:
        self._threads = [
            threading.Thread(target=self._serve, args=(g, sink), daemon=True, name=f"stream-{i}")
            for i, g in enumerate(self._generators)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, request: Request) -> None:
        self._queue.put(request)

    def close(self) -> None:
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join()
        self._threads = []

    def _serve(self, generator: FirstTokenGenerator, sink: TokenSink) -> None:
        # numpy here, not at import: backends.base imports this module in every worker,
        # and numpy's import starts its BLAS pool (the null case's one core, measured)
        import numpy as np

        while (request := self._queue.get()) is not None:
            ids = np.asarray([request.prompt], dtype=np.int64)
            first = partial(sink.first_token, request.request_id)
            try:
                trace = generator.generate(ids, request.osl, on_first_token=first)
                tokens, times = [int(t) for t in trace.tokens[0]], list(trace.token_times_s)
            # BaseException too: the request must still be answered, or its caller waits
            except BaseException as exc:  # reported; the case fails once the test ends
                sink.failed(request.request_id, exc)
                continue
            sink.finished(request.request_id, tokens, times)
