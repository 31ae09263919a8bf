"""The training studies: the MNIST time-to-train article and the PyTorch 2 article.

MNIST (second seed article): it timed two different scripts (different
epochs, batch handling and evaluation inside the timing) and read CPU load
off screenshots. Here both frameworks ran one recipe; the tables give time
to train, throughput, accuracy reached and the CPU load measured during
training, and the GPU speed-up per framework where GPU runs exist.

PyTorch 2 (third seed article): samples/s per model and configuration
(precision x eager/compile), relative to fp32 eager, with compile time in a
table of its own instead of inside (or silently outside) the throughput.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from dlbench.report.studies.study import StudyTable, relative_rows
from dlbench.results.metrics import METRICS, read
from dlbench.results.records import Result, Run

MNIST_WORKLOAD = "mnist-train"


# The MNIST article's measures, in the order its tables are printed.
MNIST_METRICS = tuple(
    METRICS[key]
    for key in (
        "time_to_train",
        "throughput",
        "steady_throughput",
        "final_accuracy",
        "time_to_target",
        "cpu",
        "load_avg",
    )
)


def mnist_label(result: Result) -> str:
    return result.case.label(only=("framework", "compile", "device", "precision"))


def _data_note(result: Result) -> str:
    training = result.details.training
    if training is None or training.data is None:
        return ""
    kind = "SYNTHETIC data" if training.data.synthetic else "MNIST"
    epochs = len(training.epochs)
    return f"{kind}, {training.data.train_samples_used} samples x {epochs} epoch(s)"


def mnist_tables(run: Run, baseline: str = "torch") -> list[StudyTable]:
    results = [r for r in run.results if r.case.workload == MNIST_WORKLOAD and r.ok]
    results.sort(key=lambda r: (r.case.device != "cpu", r.case.framework, r.case.compile))
    base = next((mnist_label(r) for r in results if r.case.framework == baseline), None)
    tables = []
    for metric in MNIST_METRICS:
        entries = [
            (mnist_label(r), value, None, _data_note(r))
            for r in results
            if (value := read(metric, r)) is not None
        ]
        title = (
            f"{metric.title} ({metric.unit}) - same network, weights, optimiser and batch; "
            "evaluation timed apart"
        )
        tables.append(StudyTable(title, metric, relative_rows(entries, base)))
    gpu = gpu_speedup_table(results)
    return [t for t in (*tables, gpu) if t is not None and t.rows]


def gpu_speedup_table(results: Sequence[Result]) -> StudyTable | None:
    """The article's headline: how much faster each framework trains on the GPU."""
    metric = METRICS["gpu_speedup"]
    time_to_train = METRICS["time_to_train"]
    entries = []
    for row in dict.fromkeys(r.case.label(only=("framework", "compile")) for r in results):
        same = [r for r in results if r.case.label(only=("framework", "compile")) == row]
        cpu = next((r for r in same if r.case.device == "cpu"), None)
        gpu = next((r for r in same if r.case.device != "cpu"), None)
        cpu_s = read(time_to_train, cpu) if cpu else None
        gpu_s = read(time_to_train, gpu) if gpu else None
        if cpu_s and gpu_s and gpu is not None:  # a time read means its result is there
            note = f"{cpu_s:.1f} s on cpu vs {gpu_s:.1f} s on {gpu.case.device}"
            entries.append((row, cpu_s / gpu_s, None, note))
    if not entries:
        return None
    title = "GPU speed-up over CPU (time to train, CPU / GPU)"
    return StudyTable(title, metric, relative_rows(entries, None))


def pt2_label(result: Result) -> str:
    # The article's own row names ("fp32 eager"): fp32 is named too, since it is
    # the row the others divide by; every other axis is fixed by the table.
    return f"{result.case.precision} {result.case.compile}"


def pt2_tables(run: Run, baseline: str = "torch") -> list[StudyTable]:
    """Per model: samples/s by configuration relative to fp32 eager; then compile times."""
    tables = []
    for metric in (METRICS["throughput"], METRICS["first_step"]):
        for workload in dict.fromkeys(r.case.workload for r in run.results):
            group = [r for r in run.results if r.case.workload == workload and r.ok]
            entries = [
                (pt2_label(r), value, None, f"batch {r.case.batch_size} on {r.case.device}")
                for r in group
                if (value := read(metric, r)) is not None
            ]
            title = f"{workload}: {metric.title} ({metric.unit}), relative to fp32 eager"
            tables.append(StudyTable(title, metric, relative_rows(entries, "fp32 eager")))
    return [t for t in tables if t.rows]


def epochs_table(run: Run) -> Table | None:
    """Per epoch of each time-to-train case: times, rate, loss and accuracy."""
    from dlbench.report.table import escape_markup, fmt

    rows = [
        (r, epoch)
        for r in run.results
        if r.details.training is not None
        for epoch in r.details.training.epochs
    ]
    if not rows:
        return None
    table = Table(title="Epochs (training timed apart from evaluation)", title_justify="left")
    columns = ("case", "epoch", "train s", "eval s", "samples/s", "loss", "test loss", "accuracy")
    for name in columns:
        table.add_column(name, justify="left" if name == "case" else "right")
    for result, epoch in rows:
        table.add_row(
            escape_markup(result.case.label(omit=("batch_size",))),
            str(epoch.epoch),
            fmt(epoch.train_s),
            fmt(epoch.eval_s),
            fmt(epoch.samples_per_s),
            fmt(epoch.loss),
            fmt(epoch.test_loss),
            fmt(epoch.accuracy),
        )
    return table
