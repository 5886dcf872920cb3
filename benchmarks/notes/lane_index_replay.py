"""The lane index's work alone (benchmarks/notes/fleet_cpu.md): record every
``LaneIndex`` call of a fleet of WORLDS worlds (gate scaled) over TICKS ticks, with its
answer, then replay them against a tree's ``LaneIndex``, checking each answer, and time
it or count its instructions (a call's: the difference of ROUNDS and 0 rounds, over the
admissions, one ``put`` each).

    PYTHONPATH=TREE python benchmarks/notes/lane_index_replay.py record 256 3 trace256.pickle
    PYTHONHASHSEED=0 PYTHONPATH=TREE valgrind --tool=callgrind \
        /root/.pyenv/versions/3.11.7/bin/python benchmarks/notes/lane_index_replay.py replay trace256.pickle 3   # and 0

A trace recorded with turns (``(start, lane)``, before places) replays on a tree with
places (``manor.admission.lane_index.place``): its turns are turned into places.
"""
import pickle
import sys
import time

from manor.admission import lane_index


def record(worlds: int, ticks: int, out: str) -> None:
    from manor.bench.fleet import _cpu_per_call
    from manor.bench.suite import BenchContext

    calls = []
    index_class = lane_index.LaneIndex

    def recorded(name, method):
        def call(self, *args):
            if name == "first_stop":  # the share's limit as its values at the weights present
                at, limit, now, *capped = args
                kept = (at, {weight: limit(weight) for weight in self._groups}, now, *map(frozenset, capped))
            elif name == "after":
                kept = (args[0], *map(frozenset, args[1:]))
            else:
                kept = args
            answer = method(self, *args)
            calls.append((name, kept, answer))
            return answer

        return call

    built = index_class.__init__

    def init(self, weights, holdings):
        built(self, weights, holdings)
        calls.append(("__init__", (dict(weights), dict(holdings)), None))

    index_class.__init__ = init
    for name in ("put", "move", "remove", "weigh", "hold", "suspect", "clear", "after", "first_stop", "before", "last"):
        setattr(index_class, name, recorded(name, getattr(index_class, name)))
    _cpu_per_call(BenchContext(), worlds, ticks)
    with open(out, "wb") as file:
        pickle.dump(calls, file)
    print(len(calls), "calls,", sum(name == "put" for name, _, _ in calls), "admissions")


def replay(trace: str, rounds: int) -> None:
    with open(trace, "rb") as file:
        calls = pickle.load(file)
    place = getattr(lane_index, "place", None)
    if place is not None:
        calls = [
            (name, (place(*args[0]), *args[1:]) if name in ("after", "first_stop") and isinstance(args[0], tuple) else args,
             place(*answer) if isinstance(answer, tuple) else answer)
            for name, args, answer in calls
        ]  # fmt: skip

    def run(check: bool) -> None:
        index = None
        for name, args, answer in calls:
            if name == "__init__":
                index = lane_index.LaneIndex(*args)
                continue
            if name == "first_stop":
                at, limits, now, *capped = args
                got = index.first_stop(at, limits.__getitem__, now, *capped)
            else:
                got = getattr(index, name)(*args)
            if check and got != answer:
                raise SystemExit(f"{name}{args}: {got}, recorded {answer}")

    run(True)
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        run(False)
        best = min(best, time.perf_counter() - started)
    admissions = sum(name == "put" for name, _, _ in calls)
    print(f"the same answers; {best / admissions * 1e6 if rounds else 0:.2f} µs an admission, best of {rounds}")


if __name__ == "__main__":
    if sys.argv[1] == "record":
        record(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    else:
        replay(sys.argv[2], int(sys.argv[3]))
