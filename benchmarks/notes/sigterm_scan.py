"""SIGTERM at every moment of a fleet process's start-up (benchmarks/notes/hang.md).

A process of ``manor fleet --processes`` (``python -m manor fleet-part``) is given part 0
of a fleet of 4 Wacky Manors in 2 processes on the Redis gate at URL (saving to a temporary
dir), and sends itself SIGTERM at the N-th call of Manor, trio, anyio or coredis code in
its main thread (a profile hook installed by a ``sitecustomize`` on its path), for N from
FIRST to LAST by STEP. Its stdin stays open and no word to start comes, as for the
process a fleet's parent stops while it starts. Each process must end within 12 s with
143 and ``manor: terminated...``; a line is printed for each that does not (a hang gets
a ``py-spy dump`` if py-spy is installed), and a count at the end.

    PYTHONPATH=TREE python benchmarks/notes/sigterm_scan.py redis://127.0.0.1:6379/0 2600 17000 20

``--count`` instead prints the call number at which the process tells its parent it is
ready (its start-up's end).
"""

import contextlib
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

import msgspec

import manor.fleet.processes
from manor.cli import main

HOOK = textwrap.dedent('''
    import os, signal, sys
    _at, _count = int(os.environ.get("SCAN_AT", "0")), os.environ.get("SCAN_COUNT")
    if (_at or _count) and "fleet-part" in sys.orig_argv:
        _n = 0
        def _profile(frame, event, arg):
            global _n
            if event != "call" or not any(p in frame.f_code.co_filename for p in ("/manor/", "/trio/", "/coredis/", "/anyio/")):
                return
            _n += 1
            if _count and frame.f_code.co_name == "send" and frame.f_code.co_filename.endswith("fleet/processes.py"):
                os.write(2, f"SCAN_COUNT {_n}\\n".encode())
            if _n == _at:
                os.write(2, f"SCAN_AT {_n}: {frame.f_code.co_filename.split('site-packages/')[-1]}:{frame.f_code.co_name}\\n".encode())
                os.kill(os.getpid(), signal.SIGTERM)
                sys.setprofile(None)
        sys.setprofile(_profile)
''')


def first_part(url: str, root: Path) -> bytes:
    """The JSON line ``manor fleet`` (the default scene) would write to its first
    process's stdin."""
    parts: list[bytes] = []

    async def taken(fleet: manor.fleet.processes.ProcessFleet) -> None:
        parts.extend(msgspec.json.encode(part) for part in fleet.parts)

    manor.fleet.processes.ProcessFleet.run = taken  # type: ignore[method-assign]
    with contextlib.redirect_stderr(io.StringIO()):  # its gate's notice; its report of no worlds
        main(["fleet", "--worlds", "4", "--processes", "2", "--ticks", "100000", "--save-dir", str(root / "saves"), "--gate-url", url, "--gate-name", "scan", "--force"])
    assert parts, "no part: has ProcessFleet.run moved?"
    return parts[0] + b"\n"


def once(part: bytes, root: Path, at: int, count: bool = False) -> tuple[str, int | None, str]:
    environment = {name: value for name, value in os.environ.items() if not name.startswith("MANOR_")}
    environment["PYTHONPATH"] = f"{root / 'hook'}{os.pathsep}{environment.get('PYTHONPATH', '')}"
    environment["SCAN_AT" if not count else "SCAN_COUNT"] = str(at)
    process = subprocess.Popen([sys.executable, "-m", "manor", "fleet-part"], cwd=root, env=environment,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    process.stdin.write(part)
    process.stdin.flush()  # and left open: the parent holds it open while it runs
    said: dict[str, bytes] = {}
    readers = [threading.Thread(target=lambda n=n, s=s: said.__setitem__(n, s.read()), daemon=True) for n, s in (("out", process.stdout), ("err", process.stderr))]
    for reader in readers:
        reader.start()
    try:
        status = process.wait(timeout=12.0 if not count else 30.0)
        verdict = "ok"
    except subprocess.TimeoutExpired:
        verdict, status = "HANG", None
        if shutil.which("py-spy"):
            said["dump"] = subprocess.run(["py-spy", "dump", "--pid", str(process.pid)], capture_output=True).stdout
        process.kill()
        process.wait()
    process.stdin.close()
    for reader in readers:
        reader.join(2)
    return verdict, status, (said.get("err", b"") + said.get("dump", b"")).decode(errors="replace")


if __name__ == "__main__":
    url = sys.argv[1]
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        (root / "hook").mkdir()
        (root / "hook" / "sitecustomize.py").write_text(HOOK, encoding="utf-8")
        part = first_part(url, root)
        if sys.argv[2] == "--count":
            process_said = once(part, root, 1, count=True)
            print(next(line for line in process_said[2].splitlines() if line.startswith("SCAN_COUNT")))
            sys.exit(0)
        first, last, step = map(int, sys.argv[2:5])
        bad = runs = 0
        for at in range(first, last, step):
            runs += 1
            verdict, status, err = once(part, root, at)
            lines = [line for line in err.splitlines() if line.strip()]
            if verdict == "HANG" or status != 128 + signal.SIGTERM:
                bad += 1
                where = next((line for line in lines if line.startswith("SCAN_AT")), "?")
                print(f"{verdict} at {at}: status {status}; {where}; last said: {lines[-1][:200] if lines else ''}", flush=True)
        print(f"{bad} of {runs} did not end with 143")
