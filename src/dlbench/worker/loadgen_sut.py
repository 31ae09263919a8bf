"""The system under test that MLPerf LoadGen drives: queries run the prepared step.

LoadGen (the mlcommons-loadgen package) decides when queries arrive and
times each one from its scheduled start to its completion. This module is
its system under test (SUT) and query sample library (QSL) around the same
prepared model and inputs the step loop times: each query runs the whole step
on prepared inputs of the query's size, so nothing is imported, converted or
allocated inside a query. The prepared batch is the QSL's samples; LoadGen's
sample indices address it.

Single-stream, multi-stream and offline queries run on LoadGen's issuing
thread (LoadGen waits for one query before it issues the next anyway).
Server queries arrive at random times, so they go on a queue that `streams`
worker threads sleep on, each with its own step (and request state): nothing
here busy-waits, and LoadGen itself sleeps until each scheduled arrival.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, ExitStack
from types import ModuleType
from typing import TYPE_CHECKING

from dlbench.errors import CaseError

if TYPE_CHECKING:
    from mlperf_loadgen import QuerySample  # the module itself is handed in (`loadgen`)

Step = Callable[[], object]


class InMemorySamples:
    """LoadGen's flush and sample-loading callbacks where there is nothing to do: the
    QSL's samples (a prepared batch, seeded prompts) are in memory before the test, and
    nothing is held back for a flush."""

    def _flush(self) -> None:
        return None

    def _load(self, indices: list[int]) -> None:
        return None

    def _unload(self, indices: list[int]) -> None:
        return None


class QueryServer(InMemorySamples):
    """LoadGen's SUT and QSL callbacks around prepared steps.

    `latencies_s` holds, per query (per step in the offline scenario), the
    seconds from LoadGen handing the query over to its result being ready: in
    the server scenario that includes the wait for a free stream.
    """

    def __init__(
        self,
        loadgen: ModuleType,
        steps: Sequence[Step],
        context: Callable[[], AbstractContextManager[object]],
        scenario: str,
        batch_size: int,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._lg = loadgen
        self._steps = list(steps)
        self._context = context
        self._scenario = scenario
        self._batch = batch_size
        self._clock = clock
        self.latencies_s: list[float] = []
        self._error: BaseException | None = None
        self._queue: queue.SimpleQueue[tuple[int, float] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self.sut = loadgen.ConstructSUT(self._issue, self._flush)
        self.qsl = loadgen.ConstructQSL(batch_size, batch_size, self._load, self._unload)
        if scenario == "server":
            self._threads = [
                threading.Thread(target=self._serve, args=(step,), daemon=True, name=f"stream-{i}")
                for i, step in enumerate(self._steps)
            ]
            for thread in self._threads:
                thread.start()

    def reset(self) -> None:
        """Forget the last test's latencies (find-peak runs several tests)."""
        self.latencies_s = []

    def close(self) -> None:
        """Stop the server's streams and free LoadGen's handles."""
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join()
        self._lg.DestroyQSL(self.qsl)
        self._lg.DestroySUT(self.sut)

    def raise_if_failed(self) -> None:
        """A step that raised inside a query fails the case once LoadGen has returned."""
        if self._error is not None:
            raise CaseError(f"a query failed: {self._error}") from self._error

    # LoadGen's callbacks. An exception must not escape into LoadGen's C++
    # thread (it would abort the process): a failing step is recorded, its
    # samples are still completed so the test ends, and the case fails after.

    def _issue(self, samples: list[QuerySample]) -> None:
        if self._scenario == "server":
            received = self._clock()
            for sample in samples:
                self._queue.put((sample.id, received))
        elif self._scenario == "offline":
            self._run_in_batches(samples)
        else:
            self._run_query(self._steps[0], [sample.id for sample in samples], self._clock())

    def _run_in_batches(self, samples: list[QuerySample]) -> None:
        """The offline query: every sample, one prepared batch per step."""
        for start in range(0, len(samples), self._batch):
            chunk = samples[start : start + self._batch]
            self._run_query(self._steps[0], [sample.id for sample in chunk], self._clock())

    def _serve(self, step: Step) -> None:
        """A server stream: sleep on the queue, run one query per item, until None."""
        with ExitStack() as stack:
            try:  # thread-local (torch.inference_mode, tf.device)
                stack.enter_context(self._context())
            except BaseException as exc:  # queries must still complete, or LoadGen waits forever
                self._error = exc
            while (item := self._queue.get()) is not None:
                sample_id, received = item
                self._run_query(step, [sample_id], received)

    def _run_query(self, step: Step, ids: list[int], received: float) -> None:
        try:
            if self._error is None:
                step()
        # BaseException too: SystemExit or KeyboardInterrupt would otherwise kill a
        # stream (its queries never complete) or reach LoadGen's C++ thread
        except BaseException as exc:  # recorded; the case fails once LoadGen returns
            self._error = exc
        self.latencies_s.append(self._clock() - received)
        self._lg.QuerySamplesComplete([self._lg.QuerySampleResponse(i, 0, 0) for i in ids])
