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

from collections.abc import Callable, Sequence

from rich.table import Table

from dlbench.report.study import Metric, StudyTable, relative_rows
from dlbench.results.records import Result, Run

MNIST_WORKLOAD = "mnist-train"
PT2_WORKLOADS = ("resnet50", "bert-base", "bert-large")


def _detail(result: Result, key: str) -> float | None:
    value = result.details.get(key) if isinstance(result.details, dict) else None
    return float(value) if isinstance(value, int | float) else None


def _timeline_stat(result: Result, key: str) -> float | None:
    summary = result.details.get("timeline_summary") if isinstance(result.details, dict) else None
    value = summary.get(key) if isinstance(summary, dict) else None
    return float(value) if isinstance(value, int | float) else None


def _from_details(key: str) -> Callable[[Result], float | None]:
    return lambda result: _detail(result, key)


MNIST_METRICS = (
    Metric("time_to_train_s", "Time to train", "s", _from_details("time_to_train_s")),
    Metric("samples_per_s", "Training throughput", "samples/s", lambda r: r.throughput),
    Metric(
        "steady_samples_per_s",
        "Training throughput after epoch 1 (no compilation)",
        "samples/s",
        _from_details("steady_samples_per_s"),
    ),
    Metric("final_accuracy", "Test accuracy reached", "fraction", _from_details("final_accuracy")),
    Metric("time_to_target_s", "Time to target accuracy", "s", _from_details("time_to_target_s")),
    Metric("cpu_percent", "CPU use while training", "% of one core", lambda r: r.cpu_percent),
    Metric(
        "load_avg_mean",
        "Mean load average while training",
        "load",
        lambda r: _timeline_stat(r, "load_avg_mean"),
    ),
)


def mnist_label(result: Result) -> str:
    precision = "" if result.precision == "fp32" else f" {result.precision}"
    return f"{result.framework} [{result.compile}] {result.device}{precision}"


def _data_note(result: Result) -> str:
    data = result.details.get("data") if isinstance(result.details, dict) else None
    if not isinstance(data, dict):
        return ""
    kind = "SYNTHETIC data" if data.get("synthetic") else "MNIST"
    epochs = len(result.details.get("epochs") or [])
    return f"{kind}, {data.get('train_samples_used')} samples x {epochs} epoch(s)"


def mnist_tables(run: Run, baseline: str = "torch") -> list[StudyTable]:
    results = [r for r in run.results if r.workload == MNIST_WORKLOAD and r.ok]
    results.sort(key=lambda r: (r.device != "cpu", r.framework, r.compile))
    base = next((mnist_label(r) for r in results if r.framework == baseline), None)
    tables = []
    for metric in MNIST_METRICS:
        entries = [
            (mnist_label(r), value, None, _data_note(r))
            for r in results
            if (value := metric.value(r)) is not None
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
    metric = Metric("gpu_speedup", "GPU speed-up over CPU", "x", lambda r: None)
    entries = []
    for framework, compile_mode in dict.fromkeys((r.framework, r.compile) for r in results):
        same = [r for r in results if (r.framework, r.compile) == (framework, compile_mode)]
        cpu = next((r for r in same if r.device == "cpu"), None)
        gpu = next((r for r in same if r.device != "cpu"), None)
        cpu_s = _detail(cpu, "time_to_train_s") if cpu else None
        gpu_s = _detail(gpu, "time_to_train_s") if gpu else None
        if cpu_s and gpu_s:
            note = f"{cpu_s:.1f} s on cpu vs {gpu_s:.1f} s on {gpu.device}"  # type: ignore[union-attr]
            entries.append((f"{framework} [{compile_mode}]", cpu_s / gpu_s, None, note))
    if not entries:
        return None
    title = "GPU speed-up over CPU (time to train, CPU / GPU)"
    return StudyTable(title, metric, relative_rows(entries, None))


def pt2_label(result: Result) -> str:
    return f"{result.precision} {result.compile}"


def pt2_tables(run: Run, baseline: str = "torch") -> list[StudyTable]:
    """Per model: samples/s by configuration relative to fp32 eager; then compile times."""
    throughput = Metric("samples_per_s", "Training throughput", "samples/s", lambda r: r.throughput)
    compile_cost = Metric(
        "first_step_s",
        "First step (compile and allocation)",
        "s",
        lambda r: r.first_call_ms / 1000.0 if r.first_call_ms is not None else None,
    )
    tables = []
    for metric in (throughput, compile_cost):
        for workload in dict.fromkeys(r.workload for r in run.results):
            group = [r for r in run.results if r.workload == workload and r.ok]
            entries = [
                (pt2_label(r), value, None, f"batch {r.batch_size} on {r.device}")
                for r in group
                if (value := metric.value(r)) is not None
            ]
            title = f"{workload}: {metric.title} ({metric.unit}), relative to fp32 eager"
            tables.append(StudyTable(title, metric, relative_rows(entries, "fp32 eager")))
    return [t for t in tables if t.rows]


def epochs_table(run: Run) -> Table | None:
    """Per epoch of each time-to-train case: times, rate, loss and accuracy."""
    from dlbench.report.table import case_name, escape_markup, fmt

    rows = [
        (r, epoch)
        for r in run.results
        if isinstance(r.details, dict) and isinstance(r.details.get("epochs"), list)
        for epoch in r.details["epochs"]
        if isinstance(epoch, dict)
    ]
    if not rows:
        return None
    table = Table(title="Epochs (training timed apart from evaluation)", title_justify="left")
    columns = ("case", "epoch", "train s", "eval s", "samples/s", "loss", "test loss", "accuracy")
    for name in columns:
        table.add_column(name, justify="left" if name == "case" else "right")
    for result, epoch in rows:
        table.add_row(
            escape_markup(f"{case_name(result)} {result.device}"),
            str(epoch.get("epoch")),
            fmt(epoch.get("train_s")),
            fmt(epoch.get("eval_s")),
            fmt(epoch.get("samples_per_s")),
            fmt(epoch.get("loss")),
            fmt(epoch.get("test_loss")),
            fmt(epoch.get("accuracy")),
        )
    return table
