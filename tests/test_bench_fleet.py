"""``manor bench --suite fleet``: fleets of 1, 4 and 16 worlds on one gate — each world's
ticks against its fair share of the gate, and fairness, with its targets."""

from __future__ import annotations

import json
from typing import Any

import pytest

from manor.bench import fleet as bench_fleet
from manor.bench.fleet import (
    CLAIMS_OFF,
    MIXED,
    WORLDS,
    fair_share_bound,
    idle_while_waiting,
)
from manor.bench.fresh_process import in_fresh_process
from manor.bench.report import evaluate_targets
from manor.bench.runner import DEFAULT_SUITES
from manor.bench.suite import BenchContext, BenchError
from manor.cli import bench_cmd, main
from manor.config import Source
from manor.records import CallRecord, TickRecord

from in_process import manor_here

KEYS = {
    "worlds", "calls_per_tick", "makespan_mean_s", "lower_bound_mean_s", "efficiency", "efficiency_worst_world",
    "gate_busy", "degraded", "jain_share_per_weight", "makespan_min_max",
}  # fmt: skip

pytestmark = pytest.mark.usefixtures("isolated")


def _call(latency: float) -> CallRecord:
    return CallRecord(tick=1, ticket=0, caller="character", agent="a", queued_at=0.0, admitted_at=0.0, finished_at=latency, outcome="ok")


def _point(worlds: int, jain: float | None, ratio: float | None) -> dict[str, Any]:
    return {"worlds": worlds, "jain_share_per_weight": jain, "makespan_min_max": ratio}


@pytest.fixture(scope="module")
def quick_fleet(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``manor bench --suite fleet --quick --json``'s result, once for the tests that read
    it (its JSON, its table, the first of two runs compared): a run is seconds of CPU.
    Its CPU part (``cpu``) in one round, not three: it is most of a ``--quick`` run's
    time (its fleet of 256 worlds most of it) and comes after every exact figure; a
    round more only takes the best of two timings."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bench_fleet, "CPU_ROUNDS", 1)
        done = manor_here("bench", "--suite", "fleet", "--quick", "--json", cwd=tmp_path_factory.mktemp("quick_fleet"))
    assert (done.returncode, done.stderr) == (0, "")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.slow(4.5)
def test_quick_json(quick_fleet: dict[str, Any]) -> None:
    result = quick_fleet
    assert result["suites"] == ["fleet"]
    fleet = result["fleet"]
    cpu = fleet["cpu"]
    assert (cpu["rounds"], [point["worlds"] for point in cpu["fleets"]]) == (1, [16, 64, 256])
    assert cpu["run_us_per_call"] > 0 and all(point["us_per_call"] > 0 for point in cpu["fleets"])
    assert sum(target["target"].startswith("fleet.cpu ") for target in result["targets"]) == len(cpu["fleets"]) + 1  # each against run's; flatness
    assert fleet["setup"]["ticks"] == 10 and fleet["setup"]["gate_size"] == 5
    points = fleet["in_process"]
    assert [point["worlds"] for point in points] == list(WORLDS)
    for point in points:
        assert set(point) == KEYS
        assert point["calls_per_tick"] == 14 * point["worlds"]
        assert point["degraded"] == 0  # no gate timeout: service, not calls given up
        assert 0.85 < point["efficiency"] < 1.05 and 0.85 < point["gate_busy"] <= 1.0
        assert point["makespan_min_max"] >= 0.95
    assert points[0]["jain_share_per_weight"] is None and points[0]["makespan_min_max"] == 1.0
    assert all(point["jain_share_per_weight"] >= 0.998 for point in points[1:])
    names = [target["target"] for target in result["targets"]]
    assert names[:4] == [
        "fleet.in_process 4 worlds: Jain's index of share / weight",
        "fleet.in_process 4 worlds: shortest / longest mean tick",
        "fleet.in_process 16 worlds: Jain's index of share / weight",
        "fleet.in_process 16 worlds: shortest / longest mean tick",
    ]
    assert all(target["met"] for target in result["targets"][:4])
    mixed = fleet["mixed"]
    assert [row["fleet"] for row in mixed] == [name for name, _ in MIXED] + list(CLAIMS_OFF)
    assert [row.get("claim_s") for row in mixed] == [None] * len(MIXED) + [0.0] * len(CLAIMS_OFF)
    # Without claims every idle slot is lent at once: no slot is left free while a call waits.
    assert all(row["idle_slot_s_while_waiting"] == 0 for row in mixed[len(MIXED):])
    assert not any("claim_s" in target["target"] for target in result["targets"])
    assert mixed[1]["worlds"][1]["calls_per_tick"] >= 200  # the crowd
    for row in mixed:  # caps hold, from the records' admissions
        for world in row["worlds"]:
            assert world["max_sessions"] is None or world["peak_held"] <= world["max_sessions"]


@pytest.mark.slow(3)
def test_the_same_figures_every_run(quick_fleet: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The virtual clock: a fleet's figures are exact. The second run's CPU part in one
    round of its smallest fleet: CPU time is measured, not exact, and popped."""
    monkeypatch.setattr(bench_fleet, "CPU_ROUNDS", 1)
    monkeypatch.setattr(bench_fleet, "CPU_WORLDS", bench_fleet.CPU_WORLDS[:1])
    assert main(["bench", "--suite", "fleet", "--quick", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)["fleet"]
    cpus = again.pop("cpu"), quick_fleet["fleet"]["cpu"]
    assert [[point["worlds"] for point in cpu["fleets"]] for cpu in cpus] == [[16], [16, 64, 256]]
    assert all(point["us_per_call"] > 0 for cpu in cpus for point in cpu["fleets"])
    assert again == {name: figures for name, figures in quick_fleet["fleet"].items() if name != "cpu"}


def test_the_table(quick_fleet: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The command's table of the figures ``--json`` gives (the shared run's)."""
    asked: list[tuple[list[str], bool]] = []

    def measured(names: list[str], context: BenchContext, progress: object = None) -> dict[str, Any]:
        asked.append((list(names), context.quick))
        return quick_fleet

    monkeypatch.setattr(bench_cmd, "run_bench", measured)
    assert main(["bench", "--suite", "fleet", "--quick"]) == 0
    assert asked == [(["fleet"], True)]
    words = " ".join(capsys.readouterr().out.split())
    assert words.startswith("fleet — worlds of The Wacky Manor (seeds 1789, +1, ...), 10 ticks each, one gate of 5 / platform 6")
    assert "fleet.in_process 16 worlds: Jain's index of share /" in words
    assert "mixed fleets at the default gate timeout" in words


def test_a_plain_bench_runs_every_suite_but_the_fleet() -> None:
    assert "fleet" not in DEFAULT_SUITES and "scheduling" in DEFAULT_SUITES


def test_the_fair_share_bound() -> None:
    """A world's tick with 5 / N slots: the longest call, or all its calls' time over its share."""
    record = TickRecord(tick=1, started_at=0.0, finished_at=9.0, calls=(_call(4.0), _call(1.0), _call(1.0)), world_hash="")
    assert fair_share_bound(record, 5, 1) == 4.0
    assert fair_share_bound(record, 5, 4) == pytest.approx(6.0 * 4 / 5)


def test_idle_while_waiting() -> None:
    """Slot-seconds free while a call waited: one of a gate of 2 waits 1 s while the other
    slot holds a call; then both slots are busy."""
    held = CallRecord(tick=1, ticket=0, caller="character", agent="a", queued_at=0.0, admitted_at=0.0, finished_at=3.0, outcome="ok")
    waits = CallRecord(tick=1, ticket=1, caller="character", agent="b", queued_at=0.0, admitted_at=1.0, finished_at=3.0, outcome="ok")
    record = TickRecord(tick=1, started_at=0.0, finished_at=3.0, calls=(held, waits), world_hash="")
    assert idle_while_waiting([[record]], 2) == 1.0
    assert idle_while_waiting([[record]], 3) == 2.0


@pytest.mark.parametrize(
    ("jain", "ratio", "met"),
    [(0.999, 0.97, (True, True)), (0.99, 0.9, (False, False)), (None, None, (None, None))],
)
def test_fairness_targets(jain: float | None, ratio: float | None, met: tuple[bool | None, bool | None]) -> None:
    """A fleet of one has nothing to be fair between: no target for it."""
    targets = evaluate_targets({"fleet": {"in_process": [_point(1, 1.0, 1.0), _point(4, jain, ratio)]}})
    assert [(target["target"], target["met"]) for target in targets] == [
        ("fleet.in_process 4 worlds: Jain's index of share / weight", met[0]),
        ("fleet.in_process 4 worlds: shortest / longest mean tick", met[1]),
    ]


def test_a_cpu_row_s_failure_in_its_own_interpreter_is_one_line_naming_the_row() -> None:
    """Each row of ``cpu`` is measured in a process of its own, as the command it
    stands for runs (``manor.bench.fresh_process``; ``test_quick_json`` measures them);
    a bad setting the worker meets is the parent's ``BenchError``, naming the row."""
    context = BenchContext(quick=True)
    broken = BenchContext(sources=[*context.sources, Source("test", 10_000, {"run.agents": -3})], quick=True)
    with pytest.raises(BenchError, match=r"^the run's row: .*run\.agents"):
        in_fresh_process(bench_fleet._cpu_per_call, broken, "the run's row", worlds=None, ticks=1)
