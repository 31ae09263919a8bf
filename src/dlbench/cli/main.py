"""The `dlbench` command: parse, dispatch through one table, turn errors into exit codes.

Exit codes: 0 success; 1 a case failed (or a regression gate tripped); 2 a
user error (one line, no traceback), a regression gate over runs with no case
in common among them; 130 interrupted.
"""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Callable, Sequence

from dlbench.cli import (
    fleet_commands,
    history_commands,
    info_commands,
    run_commands,
    store_commands,
)
from dlbench.cli.parser import build_parser
from dlbench.cli.terminal import err
from dlbench.errors import UserError
from dlbench.report.table import one_line

EXIT_OK, EXIT_CASE_FAILED, EXIT_USER_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130

# Every subcommand and the function that carries it out.
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": run_commands.cmd_run,
    "roofline": run_commands.cmd_roofline,
    "rerun": run_commands.cmd_rerun,
    "list": info_commands.cmd_list,
    "env": info_commands.cmd_env,
    "show": info_commands.cmd_show,
    "inspect": info_commands.cmd_inspect,
    "runs": store_commands.cmd_runs,
    "export": store_commands.cmd_export,
    "import": store_commands.cmd_import,
    "compare": store_commands.cmd_compare,
    "report": store_commands.cmd_report,
    "history": history_commands.cmd_history,
    "fleet": fleet_commands.cmd_fleet,
}


def _interrupt_on(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv: Sequence[str] | None = None) -> int:
    # A terminated or hung-up dlbench cleans up like Ctrl-C: the running worker
    # is killed and the finished cases stay stored.
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for name in ("SIGTERM", "SIGHUP"):
            if hasattr(signal, name):
                number = getattr(signal, name)
                previous[number] = signal.signal(number, _interrupt_on)
    try:
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except UserError as exc:
        # the message may quote a file's or a run's text: shown, never obeyed
        line = one_line(f"dlbench: error: {exc}")
        err.print(line, markup=False, highlight=False, soft_wrap=True)
        return EXIT_USER_ERROR
    except KeyboardInterrupt as stop:
        if not hasattr(stop, "run"):  # a RunInterrupted already said what was kept
            err.print("dlbench: interrupted", markup=False)
        return EXIT_INTERRUPTED
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
