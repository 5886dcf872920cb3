"""Shares of a py-spy raw profile (``fleet_profile.py``) by what a fleet adds to a run:
the samples inside the trio run (``unrolled_run``), by the code on their stacks.

    python benchmarks/notes/fleet_profile_shares.py run.txt 67.2 f16.txt 105.7 f256.txt 133.5

Each profile with its quiet µs a call: a share is also shown as µs of that figure.
"""
import sys

#: What a fleet adds to a run, by the frames on a sample's stack (a sample counts in each it matches).
CATEGORIES = {
    "the gate (Gate.arrive, _dispatch, Permit.release and below)": ("manor/admission/gate.py",),
    "  the claims (ClaimBook, Gate._book, Gate._lends_to)": ("manor/admission/claims.py", "Gate._book ", "Gate._lends_to "),
    "  the lanes and their index": ("manor/admission/lanes.py", "manor/admission/lane_index.py"),
    "the ticket office": ("manor/admission/tickets.py",),
    "the fleet driver (manor/fleet)": ("manor/fleet/",),
    "the instruments (per-world accounting)": ("manor/tick/instruments.py",),
    "the collector (gc_collect_main)": ("gc_collect_main",),
    "trio's timers (Deadlines)": ("Deadlines.",),
    "the simulator (manor/providers/sim.py)": ("manor/providers/sim.py",),
}


def samples(path: str) -> list[tuple[list[str], int]]:
    rows = []
    for line in open(path, encoding="utf-8"):
        stack, count = line.rstrip().rsplit(" ", 1)
        frames = stack.split(";")
        if any(frame.startswith("unrolled_run ") for frame in frames):
            rows.append((frames, int(count)))
    return rows


pairs = [(sys.argv[i], float(sys.argv[i + 1])) for i in range(1, len(sys.argv), 2)]
shares = []
for path, _ in pairs:
    rows = samples(path)
    total = sum(count for _, count in rows)
    shares.append({name: sum(count for frames, count in rows if any(key in frame for frame in frames for key in keys)) / total for name, keys in CATEGORIES.items()})
for name in CATEGORIES:
    print(f"{name:62s}", "  ".join(f"{100 * share[name]:5.1f} % {share[name] * us:5.1f} µs" for share, (_, us) in zip(shares, pairs)))
