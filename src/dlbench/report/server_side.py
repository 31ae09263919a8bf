"""A server's own counters beside the client's: show's table, compare's, the HTML section.

For each endpoint result whose server exposed /metrics (details.endpoint.server), its
latencies on its own clock sit beside the client's over the same requests, with the
difference: client minus server is what the server's clock leaves out (the network,
the client, and the server's HTTP front end before it stamps a request's arrival and
after it has a token), never the server's work. The server's percentiles are
estimates from its histogram buckets, shown with the bucket's bounds. A result whose
server's counters could not be read says why in one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from dlbench.measure.server_counters import LATENCIES, BucketEstimate, ServerCounters
from dlbench.report.table import case_name, escape_markup, fmt, plain
from dlbench.results.records import Result, Run

OUTSIDE = (
    "client - server: the network, the client and the server's HTTP front end, outside "
    "the server's clock"
)
BUCKETS = "server percentiles are estimates from its histogram's buckets (bounds in brackets)"


@dataclass(frozen=True)
class Latency:
    """One latency of a window on both clocks (ms): the client's mean, the server's
    exact mean, their difference, and the server's percentiles as bucket estimates."""

    name: str
    client_ms: float | None
    server_ms: float | None
    outside_ms: float | None
    percentiles: tuple[tuple[str, BucketEstimate | None], ...]


def latencies(server: ServerCounters) -> list[Latency]:
    """The server's latencies it reported, each beside the client's."""
    rows = []
    for part, name in LATENCIES.items():
        timing = server.timing(part)
        if timing is None:
            continue
        rows.append(
            Latency(
                name,
                server.client_mean_ms(part),
                timing.mean_ms,
                server.outside_ms(part),
                (("p50", timing.p50), ("p90", timing.p90), ("p99", timing.p99)),
            )
        )
    return rows


def with_server(run: Run) -> list[tuple[Result, ServerCounters]]:
    """The run's measured endpoint results, each with its server's counters record."""
    found = []
    for result in run.results:
        load = result.details.endpoint
        if result.ok and load is not None and load.server is not None:
            found.append((result, load.server))
    return found


def estimate_text(estimate: BucketEstimate | None) -> str:
    """A bucket estimate with the bounds between which the true value lies."""
    if estimate is None:
        return "-"
    upper = "inf" if estimate.upper_ms is None else fmt(estimate.upper_ms)
    return f"{fmt(estimate.ms)} [{fmt(estimate.lower_ms)}-{upper}]"


def share(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def count(value: float | None) -> str:
    """A count (requests, tokens) as it is: 2, not 2.00."""
    return "-" if value is None else f"{value:,.0f}" if value == int(value) else fmt(value)


def cache_text(server: ServerCounters) -> str:
    """The prefix cache's hits over its queries, in prompt tokens."""
    if server.prefix_cache_queries is None:
        return "-"
    hits = count(server.prefix_cache_hits)
    return f"{share(server.prefix_cache_hit_rate)} ({hits}/{count(server.prefix_cache_queries)})"


def server_table(run: Run) -> RenderableType | None:
    """show's table: per case, each latency on both clocks, and the server's state."""
    pairs = with_server(run)
    if not pairs:
        return None
    table = Table(
        title="The server's own counters over each measured window (its /metrics), ms",
        caption=escape_markup(f"{OUTSIDE}; {BUCKETS}"),
    )
    for name in ("case", "server", "latency", "client", "server mean", "client - server",
                 "server p50", "server p99"):  # fmt: skip
        table.add_column(name, justify="left" if name in ("case", "server", "latency") else "right")
    unread = []
    for result, server in pairs:
        if server.unread is not None:
            unread.append(Text(plain(f"{case_name(result)}: no server counters: {server.unread}")))
            continue
        rows = latencies(server)
        for index, row in enumerate(rows):
            first = index == 0
            table.add_row(
                escape_markup(case_name(result)) if first else "",
                escape_markup(str(server.family)) if first else "",
                row.name,
                fmt(row.client_ms),
                fmt(row.server_ms),
                fmt(row.outside_ms),
                escape_markup(estimate_text(row.percentiles[0][1])),
                escape_markup(estimate_text(row.percentiles[2][1])),
            )
        table.add_row("", "", "state", *state_cells(server), end_section=True)
    return Group(table, *unread)


def state_cells(server: ServerCounters) -> list[str]:
    """The window's prefix-cache hits, preemptions and peak KV-cache use, in the
    latency columns' places (a row of its own under each case)."""
    kv = server.kv_cache
    return [
        f"prefix cache {escape_markup(cache_text(server))}",
        f"preemptions {count(server.preemptions)}",
        f"KV peak {share(kv.peak if kv else None)}",
        f"running peak {count(server.running.peak if server.running else None)}",
        f"waiting peak {count(server.waiting.peak if server.waiting else None)}",
    ]


def server_comparison_table(a: Run, b: Run) -> RenderableType | None:
    """compare's: for each case in both runs with server counters, A's and B's
    latencies on the server's clock beside the client's."""
    in_b = {r.case.key(): s for r, s in with_server(b) if s.unread is None}
    pairs = [(r, s, in_b[r.case.key()]) for r, s in with_server(a)
             if s.unread is None and r.case.key() in in_b]  # fmt: skip
    if not pairs:
        return None
    table = Table(
        title=f"The servers' own counters, A = {escape_markup(a.id)}, B = "
        f"{escape_markup(b.id)} (means, ms)",
        caption=escape_markup(OUTSIDE),
    )
    for name in ("case", "latency", "client A", "server A", "client - server A",
                 "client B", "server B", "client - server B"):  # fmt: skip
        table.add_column(name, justify="left" if name in ("case", "latency") else "right")
    for result, first, second in pairs:
        rows_b = {row.name: row for row in latencies(second)}
        for index, row in enumerate(latencies(first)):
            other = rows_b.get(row.name)
            table.add_row(
                escape_markup(case_name(result)) if index == 0 else "",
                row.name,
                fmt(row.client_ms),
                fmt(row.server_ms),
                fmt(row.outside_ms),
                *(fmt(v) for v in _means(other)),
            )
    return table


def _means(row: Latency | None) -> Sequence[float | None]:
    return (None, None, None) if row is None else (row.client_ms, row.server_ms, row.outside_ms)


def server_html(run: Run) -> str:
    """The HTML page's section: a table per endpoint result."""
    pairs = with_server(run)
    if not pairs:
        return ""
    parts = ["<h3>The server's own counters (its /metrics over each measured window)</h3>",
             f"<p class=\"note\">{escape(OUTSIDE)}; {escape(BUCKETS)}.</p>"]  # fmt: skip
    for result, server in pairs:
        title = f"<h4>{escape(case_name(result))}</h4>"
        if server.unread is not None:
            parts.append(f"{title}<p>no server counters: {escape(server.unread)}</p>")
            continue
        parts.append(title + _html_latencies(server) + _html_state(server))
    return "".join(parts)


def _html_latencies(server: ServerCounters) -> str:
    head = ("latency (ms)", "client mean", "server mean", "client - server",
            "server p50", "server p90", "server p99")  # fmt: skip
    rows = []
    for row in latencies(server):
        cells = [row.name, fmt(row.client_ms), fmt(row.server_ms), fmt(row.outside_ms)]
        cells += [estimate_text(estimate) for _, estimate in row.percentiles]
        rows.append("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>")
    header = "".join(f"<th>{escape(h)}</th>" for h in head)
    return f'<div class="wide"><table><tr>{header}</tr>{"".join(rows)}</table></div>'


def _html_state(server: ServerCounters) -> str:
    facts = [
        ("server", str(server.family)),
        ("window", f"{fmt(server.window_s)} s"),
        ("prefix cache hits (prompt tokens)", cache_text(server)),
        ("preemptions", count(server.preemptions)),
    ]
    for name, gauge in (("KV-cache use", server.kv_cache), ("requests running", server.running),
                        ("requests waiting", server.waiting)):  # fmt: skip
        if gauge is not None:
            fraction = name == "KV-cache use"
            peak, mean = (share(gauge.peak), share(gauge.mean)) if fraction else (
                count(gauge.peak), fmt(gauge.mean))  # fmt: skip
            facts.append((name, f"peak {peak}, mean {mean} over {gauge.samples} samples"))
    if server.scrape_ms is not None:
        facts.append(("a scrape", f"{fmt(server.scrape_ms)} ms every {server.sample_interval_s} s"))
    if server.note:
        facts.append(("note", server.note))
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in facts)
    return f"<table>{rows}</table>"
