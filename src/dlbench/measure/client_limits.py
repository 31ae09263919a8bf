"""How many requests one client process can hold open at once.

Each request in flight holds a TCP connection, and each connection a file
descriptor and, towards the server's one address, a local port. So a closed loop
holds at most: the process's open-file limit (its hard limit: the worker raises its
soft limit to that, `raise_open_files`) less the files the worker keeps open for
itself, and the kernel's range of ephemeral ports, whichever is smaller. With more
users than that, only some would ever be in flight (the rest fail to connect, or
wait), so the load that ran would not be the load asked for: the plan refuses it
(plan.endpoint_cases), naming the limit and why.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# Descriptors the worker holds for itself: its interpreter and libraries, its log,
# result and progress files, the event loop's own
RESERVED_FILES = 64
PORT_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


@dataclass(frozen=True, order=True)
class ConnectionLimit:
    most: int  # connections one client process can hold open at once
    why: str


def connection_limit() -> ConnectionLimit | None:
    """The most connections a worker can hold open, and why (None: no limit known)."""
    limits = []
    files = _usable_open_files()
    if files is not None:
        why = f"the open-file limit ({files}, ulimit -n) less {RESERVED_FILES} for its own files"
        limits.append(ConnectionLimit(files - RESERVED_FILES, why))
    ports = _ephemeral_ports()
    if ports is not None:
        why = f"the kernel's {ports} ephemeral ports (net.ipv4.ip_local_port_range)"
        limits.append(ConnectionLimit(ports, why))
    return min(limits) if limits else None


def raise_open_files() -> None:
    """The soft open-file limit up to the hard one, as connection_limit counts on."""
    try:
        import resource
    except ImportError:  # not a POSIX system
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _usable_open_files() -> int | None:
    """The hard limit, which a process may raise its soft limit to; the soft one where
    the hard is unlimited (a system's own ceiling then applies, unknown here)."""
    try:
        import resource
    except ImportError:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    usable = soft if hard == resource.RLIM_INFINITY else hard
    return None if usable == resource.RLIM_INFINITY else usable


def _ephemeral_ports() -> int | None:
    try:
        low, high = (int(word) for word in PORT_RANGE.read_text().split())
    except (OSError, ValueError):
        return None
    return high - low + 1
