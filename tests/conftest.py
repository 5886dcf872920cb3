"""Shared test setup: a reproducible Hypothesis profile, a hermetic environment, and the
count of gate operations the property tests drive (printed in the terminal summary, the
workers' counts added up when pytest-xdist runs the suite in parallel)."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from hypothesis import settings

from redis_server import RedisServer

# Derandomized by default, so that the gate-operations figure below can be quoted and a
# CI failure reproduces locally. HYPOTHESIS_PROFILE=explore hunts with fresh seeds.
# (Hypothesis also draws, now and then, literal constants found in the project's loaded
# modules, so the examples - and the figure - shift with the code and with which test
# files are collected; for a given tree and command they are the same every run.)
settings.register_profile("manor", deadline=None, derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", deadline=None, max_examples=2000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "manor"))


@attrs.define
class GateOperations:
    """What the property tests asked of gates: acquire calls and permit releases."""

    acquires: int = 0
    releases: int = 0
    withdrawals: int = 0
    examples: int = 0

    @property
    def total(self) -> int:
        return self.acquires + self.releases


GATE_OPERATIONS = GateOperations()


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    if not pluginmanager.has_plugin("xdist"):
        # The configuration's addopts ask for workers; without pytest-xdist (not
        # installed, or -p no:xdist) the suite runs in this one process.
        parser.addoption("--numprocesses", help="ignored: pytest-xdist is not loaded")
        parser.addoption("--dist", help="ignored: pytest-xdist is not loaded")


@pytest.fixture(scope="session")
def gate_operations() -> GateOperations:
    """The session's tally of gate operations driven by the property tests."""
    return GATE_OPERATIONS


@pytest.fixture(scope="session", autouse=True)
def _no_manor_environment() -> Iterator[None]:
    """A developer's MANOR_* variables must not leak into configuration tests."""
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith("MANOR_"):
                patch.delenv(name)
        yield


@pytest.fixture(scope="session", autouse=True)
def _console_width_pinned() -> Iterator[None]:
    """Text is matched at 80 columns, whatever the developer's terminal exports: Rich and
    argparse wrap at ``COLUMNS`` when it is set (their default, 80, when it is not), and
    the commands the tests start inherit it. A test that needs other widths sets them."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COLUMNS", "80")
        patch.setenv("LINES", "24")
        yield


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test of configuration as a user meets it: run from an empty folder (no
    manor.toml), with no MANOR_* variables (set ones of its own with monkeypatch)."""
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith("MANOR_"):
            monkeypatch.delenv(name)


@pytest.hookimpl(trylast=True)  # after the session's fixtures are torn down (``runner``)
def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # a pytest-xdist worker: hand its count to the controller
        workeroutput["gate_operations"] = attrs.asdict(GATE_OPERATIONS)
        _heap_collected_then_frozen()


def _heap_collected_then_frozen() -> None:
    """A worker's heap collected once, then left out of the collector's later passes.

    Once a worker says it has finished (after this hook), the controller closes its
    channel, and execnet gives what the worker still runs 5 seconds before it sends the
    worker a SIGINT (``WorkerGateway._terminate_execution``). What it still runs is
    mostly pytest's last look for unraisable exceptions: five full passes of the
    collector over everything the worker's tests loaded. On a loaded machine they took
    longer, and the SIGINT landed inside one, as a ``KeyboardInterrupt`` traceback at
    the end of a green run. Collected here, before the worker says it has finished, any
    finalizer that fails is still reported; frozen, the five passes have nothing left
    to walk."""
    gc.collect()
    gc.freeze()


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: absent without it
def pytest_testnodedown(node: object, error: object) -> None:
    """A worker has finished: add its count of gate operations to the session's."""
    counted = getattr(node, "workeroutput", {}).get("gate_operations")
    if counted is not None:
        for field, value in counted.items():
            setattr(GATE_OPERATIONS, field, getattr(GATE_OPERATIONS, field) + value)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    ops = GATE_OPERATIONS
    if ops.examples:
        terminalreporter.write_line(
            f"gate operations driven by the property tests: {ops.total} "
            f"({ops.acquires} acquire calls + {ops.releases} releases; "
            f"{ops.withdrawals} withdrawals; {ops.examples} examples)"
        )


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A real redis-server for the session, on a free loopback port. Tests share it and
    keep apart by gate name."""
    server = RedisServer().start()
    try:
        yield server.url
    finally:
        server.kill()


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A redis-server of the test's own, which it may kill and start again."""
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.kill()


def _signal_state() -> tuple[object, ...]:
    """What a child started now inherits of this process's signals through ``exec``
    (ignored or not, and the blocked mask), and which handlers Python runs here."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return ()
    return (
        signal.getsignal(signal.SIGINT),
        signal.getsignal(signal.SIGTERM),
        frozenset(signal.pthread_sigmask(signal.SIG_BLOCK, [])),
    )


@pytest.fixture(autouse=True)
def _signals_left_as_found() -> Iterator[None]:
    """A test that leaves SIGINT or SIGTERM ignored, blocked or handled otherwise than it
    found them fails here, by name: otherwise the worker's later tests lose their signals
    (a child inherits an ignored or blocked signal through ``exec``) and fail or hang."""
    before = _signal_state()
    yield
    after = _signal_state()
    assert after == before, f"the test left the signals changed: {before} -> {after}"


def pytest_configure(config: pytest.Config) -> None:
    """Run as a background job of a script (``pytest &``, ``nohup``), this process and
    every worker start with SIGINT ignored, and every child started by a test inherits
    that: Manor keeps an ignored SIGINT ignored, as it should, and the tests of its
    Ctrl-C then wait in vain. The tests assume a terminal's SIGINT: restore it."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    config.addinivalue_line("markers", "slow(seconds): the test takes about this long on a quiet machine; slow tests run first, the slowest first")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests first, the slowest first. pytest-xdist's worksteal hands each worker
    a run of the tests in this order, and a worker that runs dry steals from the end of
    the other's queue: a long test that starts late ends the run while the other worker
    idles, and one that starts early is done while the other runs the short ones."""
    items.sort(key=_expected_seconds, reverse=True)  # stable: the rest keep their order
    # Property tests stay where they are, unmarked: Hypothesis also draws constants of
    # the project's modules loaded so far, so a test run earlier draws other examples.


def _expected_seconds(item: pytest.Item) -> float:
    marker = item.get_closest_marker("slow")
    return 0.0 if marker is None else marker.args[0]
