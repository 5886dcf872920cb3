"""The bounded-wait experiment: exact in-process results pinned (worked out by hand from
DESIGN.md's rules), determinism, the CLI, and agreement of the --http run."""

from __future__ import annotations

import json

import msgspec
import pytest
import trio

from manor.cli import main
from manor.experiment import ExperimentSettings, run_in_process, run_over_http

A, T, U = "answered", "timed_out", "unfinished"
_ = None

# Per request 1..12: (worker_s, remote_start_s, finished_s, outcome); request i arrives at i-1.
EXPECTED = {
    # Two workers, no timeout: the hangs (4 at 3 s, 8 at 7.9 s) pin both workers forever,
    # so from request 9 on nothing gets a worker.
    "default": (
        ExperimentSettings(),
        [(0, 0, 1.3, A), (1, 1, 2.3, A), (2, 2, 3.3, A), (3, 3, _, U), (4, 4, 5.3, A), (5.3, 5.3, 6.6, A),
         (6.6, 6.6, 7.9, A), (7.9, 7.9, _, U), (_, _, _, U), (_, _, _, U), (_, _, _, U), (_, _, _, U)],
    ),
    # Timeout 3 s, no cancel: the timed-out hangs 4 and 8 keep their remote slots forever,
    # and 10 (6 s) keeps its slot until 15.1 after timing out at 12.1. With 4, 8 and 10
    # holding all 3 slots, 11 and 12 time out in the remote queue and are dropped. (12's
    # deadline 15.1 is the instant 10's slot frees: a deadline comes first.)
    "timeout 3": (
        ExperimentSettings(timeout_s=3),
        [(0, 0, 1.3, A), (1, 1, 2.3, A), (2, 2, 3.3, A), (3, 3, 6, T), (4, 4, 5.3, A), (5.3, 5.3, 6.6, A),
         (6, 6, 7.3, A), (7, 7, 10, T), (8, 8, 9.1, A), (9.1, 9.1, 12.1, T), (10, _, 13, T), (12.1, _, 15.1, T)],
    ),
    # Timeout 3 s with cancel: every timeout frees the remote slot too; only the hangs and
    # the 6 s request time out.
    "timeout 3 cancel": (
        ExperimentSettings(timeout_s=3, cancel=True),
        [(0, 0, 1.3, A), (1, 1, 2.3, A), (2, 2, 3.3, A), (3, 3, 6, T), (4, 4, 5.3, A), (5.3, 5.3, 6.6, A),
         (6, 6, 7.3, A), (7, 7, 10, T), (8, 8, 9.1, A), (9.1, 9.1, 12.1, T), (10, 10, 11.3, A), (11.3, 11.3, 12.1, A)],
    ),
    # Only 4 hangs: one worker is pinned from 3 s, the other serves everyone after it in turn.
    "hangs 4": (
        ExperimentSettings(hangs=(4,)),
        [(0, 0, 1.3, A), (1, 1, 2.3, A), (2, 2, 3.3, A), (3, 3, _, U), (4, 4, 5.3, A), (5.3, 5.3, 6.6, A),
         (6.6, 6.6, 7.9, A), (7.9, 7.9, 9.2, A), (9.2, 9.2, 10.3, A), (10.3, 10.3, 16.3, A), (16.3, 16.3, 17.6, A),
         (17.6, 17.6, 18.4, A)],
    ),
    # No hangs: only 12 waits for a worker (10 and 11 hold both until 11.3).
    "no hangs": (
        ExperimentSettings(hangs=()),
        [(0, 0, 1.3, A), (1, 1, 2.3, A), (2, 2, 3.3, A), (3, 3, 4.3, A), (4, 4, 5.3, A), (5, 5, 6.3, A),
         (6, 6, 7.3, A), (7, 7, 8.3, A), (8, 8, 9.1, A), (9, 9, 15, A), (10, 10, 11.3, A), (11.3, 11.3, 12.1, A)],
    ),
    # Three workers, timeout 3, no cancel: now the remote agent's queue is where 10, 11
    # and 12 wait, behind the two forever-running hangs; 11 and 12 are dropped unstarted.
    "workers 3 timeout 3": (
        ExperimentSettings(workers=3, timeout_s=3),
        [(0, 0, 1.3, A), (1, 1, 2.3, A), (2, 2, 3.3, A), (3, 3, 6, T), (4, 4, 5.3, A), (5, 5, 6.3, A),
         (6, 6, 7.3, A), (7, 7, 10, T), (8, 8, 9.1, A), (9, 9.1, 12, T), (10, _, 13, T), (11, _, 14, T)],
    ),
}


def _rows(result) -> list[tuple]:
    return [(r.worker_s, r.remote_start_s, r.finished_s, r.outcome) for r in result.requests]


@pytest.mark.parametrize("name", list(EXPECTED))
def test_in_process_results_are_pinned(name: str) -> None:
    settings, rows = EXPECTED[name]
    result = run_in_process(settings)
    assert [r.arrived_s for r in result.requests] == [float(i) for i in range(12)]
    assert _rows(result) == rows
    outcomes = [row[3] for row in rows]
    assert (result.answered, result.timed_out, result.unfinished) == (outcomes.count(A), outcomes.count(T), outcomes.count(U))


def test_same_result_every_time() -> None:
    """trio shuffles its run queue differently each run; the results never change."""
    for settings in (ExperimentSettings(timeout_s=3), ExperimentSettings(workers=3, timeout_s=2.5, cancel=True)):
        first = run_in_process(settings)
        for _ in range(30):
            assert run_in_process(settings) == first


def _manor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``manor experiment bounded-wait ARGS`` in this process: its exit status, stdout and
    stderr (a Python started for each was most of these tests' time)."""
    try:
        code = main(["experiment", "bounded-wait", *args])
    except SystemExit as exc:  # argparse's refusals
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def test_json_has_exactly_the_promised_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _manor(capsys, "--timeout", "3", "--cancel", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert list(data) == ["workers", "timeout_s", "cancel", "hangs", "answered", "timed_out", "unfinished", "requests"]
    assert (data["workers"], data["timeout_s"], data["cancel"], data["hangs"]) == (2, 3.0, True, [4, 8])
    assert (data["answered"], data["timed_out"], data["unfinished"]) == (9, 3, 0)
    assert list(data["requests"][0]) == ["id", "arrived_s", "worker_s", "remote_start_s", "finished_s", "outcome"]


def test_table_and_bad_flags(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _manor(capsys, "--hangs", "none")
    assert code == 0 and "answered 12   timed out 0   unfinished at 60 s 0" in out
    for bad in (["--hangs", "5"], ["--timeout", "-1"], ["--workers", "two"], ["--time-scale", "0"]):
        code, _, err = _manor(capsys, *bad)
        assert code == 2 and len(err.strip().splitlines()) == 1, err


#: Real seconds are noisy: allowed difference, in experiment seconds. Typical drift is
#: 0.1-0.3 s (10-30 ms real at scale 0.1); 150 ms of real time covers a loaded machine.
#: The outcomes, and which times exist at all, must agree exactly.
_TOLERANCE_S = 1.5


@pytest.mark.slow(7)
def test_http_run_agrees_with_the_exact_run() -> None:
    """Against serve-agent over loopback, at time scale 0.1: same outcomes, times close.

    Settings without a tie that real time could break either way: 'timeout 3' (no cancel)
    has one (request 12's deadline is the instant a slot frees), so it is not used here.
    """
    settings = [EXPECTED["default"][0], EXPECTED["timeout 3 cancel"][0]]
    exact = [run_in_process(setting) for setting in settings]
    # One at a time: two real-time runs in one thread would delay each other's requests.
    results = {i: trio.run(lambda: run_over_http(setting, time_scale=0.1)) for i, setting in enumerate(settings)}
    for want_result, i in zip(exact, range(len(settings))):
        http = results[i]
        assert [r.outcome for r in http.requests] == [r.outcome for r in want_result.requests]
        for got, want in zip(msgspec.to_builtins(http.requests), msgspec.to_builtins(want_result.requests)):
            for key in ("arrived_s", "worker_s", "remote_start_s", "finished_s"):
                assert (got[key] is None) == (want[key] is None), (got, want)
                if want[key] is not None:
                    assert abs(got[key] - want[key]) <= _TOLERANCE_S, (key, got, want)
