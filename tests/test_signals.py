"""Ctrl-C (SIGINT) and SIGTERM stop every command in one line, with exit 128 + the
signal, the save closed with every finished tick, and remote runs cancelled.

Most tests are real ``python -m manor`` processes on the real clock, signalled once
their work is under way (a save holding ticks, a server with runs in flight, the
process's own sockets or CPU time); a few run ``main`` in this process and send the
signal from inside a tick, to hit an exact moment.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import fcntl
import gc
import json
import os
import pty
import random
import re
import select
import signal
import subprocess
import sys
import termios
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from scenes_fixture import fixed_latency_scene

import manor.play.stop_signals
import manor.run.interrupts
import manor.run.opening
import manor.run.startup
from manor.admission.redis_gate import RedisGate
from manor.cli import main
from manor.errors import SaveError
from manor.play.stop_signals import StopSignals
from manor.play.terminal import PUT_BACK
from manor.run.interrupts import unawaited_coroutines_held
from manor.saves import SaveWriter, read_save
from manor.tick.statistics import RunStatistics

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="POSIX signals, /proc")

#: (signal, exit status, the word the line starts with)
STOPS = [
    pytest.param(signal.SIGINT, 130, "interrupted", id="SIGINT"),
    pytest.param(signal.SIGTERM, 143, "terminated", id="SIGTERM"),
]
#: Longest any one wait of these tests may take, on a loaded machine.
PATIENCE_S = 60.0

def _slow_scene(root: Path, latency: float) -> Path:
    """Five calls a tick, each ``latency`` s, through a gate of 2: calls wait at the gate."""
    return fixed_latency_scene(root, latency, "slow")


def _environment() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if not name.startswith("MANOR_")}


def _start(argv: list[str], cwd: Path, **options: Any) -> subprocess.Popen[str]:
    options = {"stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE, **options}
    return subprocess.Popen([sys.executable, "-m", "manor", *argv], cwd=cwd, env=_environment(), text=True, **options)


def _wait_until(process: subprocess.Popen[str], ready: Callable[[], bool]) -> None:
    """Poll ``ready()`` while the process runs; fail if it ends first or takes too long."""
    deadline = time.monotonic() + PATIENCE_S
    while not ready():
        if process.poll() is not None:
            pytest.fail(f"the process ended before it was signalled: {process.communicate()[1]}")
        assert time.monotonic() < deadline, "the process never got under way"
        time.sleep(0.02)


def _state(pid: int) -> str:
    """The process's state as Linux says it (R running, S sleeping, T stopped...)."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


def _stop(process: subprocess.Popen[str], signum: int) -> str:
    """Send ``signum``; the process's stderr once it has ended."""
    return _stop_reading(process, signum)[1]


def _stop_reading(process: subprocess.Popen[str], signum: int) -> tuple[str, str]:
    """Send ``signum``; the process's stdout (when piped) and stderr once it has ended."""
    try:
        process.send_signal(signum)
        return process.communicate(timeout=PATIENCE_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def _ticks(save: Path) -> int:
    try:
        return len(read_save(save).ticks)
    except SaveError:
        return 0  # not created yet, or caught inside its header


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _sockets(pid: int) -> int:
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:
            pass  # closed meanwhile
    return count


def _verifies(save: Path, capsys: pytest.CaptureFixture[str]) -> bool:
    capsys.readouterr()
    code = main(["replay", str(save), "--verify", "--json"])
    return code == 0 and json.loads(capsys.readouterr().out)["verified"]


class TestRun:
    @pytest.mark.parametrize(("signum", "status", "word"), STOPS)
    def test_a_signal_mid_tick_stops_the_run_and_closes_the_save(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], signum: int, status: int, word: str
    ) -> None:
        """Ticks of 0.15 s back to back, calls waiting at the gate: signalled once two are
        saved, the run ends in one line naming the ticks and the save, which verifies."""
        scene = _slow_scene(tmp_path, latency=0.05)
        save = tmp_path / "s.msav"
        process = _start(["run", "--scene", str(scene), "--clock", "real", "--ticks", "100000", "--save", str(save)], tmp_path)
        _wait_until(process, lambda: _ticks(save) >= 2)
        err = _stop(process, signum)
        recorded = read_save(save)
        ticks = len(recorded.ticks)
        assert process.returncode == status
        assert err == f"manor: {word} after {ticks} ticks; saved to {save}\n"
        assert recorded.finished and not recorded.warnings  # the end frame is there
        assert _verifies(save, capsys)

    def test_a_signal_in_the_first_tick_says_the_save_holds_no_tick(self, tmp_path: Path) -> None:
        scene = _slow_scene(tmp_path, latency=5.0)
        save = tmp_path / "s.msav"
        process = _start(["run", "--scene", str(scene), "--clock", "real", "--save", str(save)], tmp_path)
        _wait_until(process, save.exists)
        err = _stop(process, signal.SIGINT)
        assert process.returncode == 130
        assert err == f"manor: interrupted after 0 ticks; {save} holds no whole tick\n"

    @pytest.mark.parametrize(("signum", "status", "word"), STOPS)
    def test_a_signal_while_the_save_is_made_waits_for_it(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, signum: int, status: int, word: str
    ) -> None:
        """In this process: the signal arrives while the save file is being made (its
        header written, the writer not yet returned). It is held until the writer is
        there, so the line names the save and the save is closed."""
        save = tmp_path / "s.msav"
        create = SaveWriter.create.__func__  # type: ignore[attr-defined]

        def signalled_inside(cls: type[SaveWriter], *args: Any, **kwargs: Any) -> SaveWriter:
            writer = create(cls, *args, **kwargs)
            os.kill(os.getpid(), signum)
            time.sleep(0.05)  # a signal not held would interrupt here
            return writer

        monkeypatch.setattr(SaveWriter, "create", classmethod(signalled_inside))
        # Another thread in the process (a library's), which the system may hand the signal to.
        other, stop = threading.Thread(target=lambda: stop.wait(), daemon=True), threading.Event()
        other.start()
        try:
            code = main(["run", "--scene", str(_slow_scene(tmp_path, latency=1.0)), "--ticks", "3", "--save", str(save)])
        finally:
            stop.set()
        assert (code, capsys.readouterr().err) == (status, f"manor: {word} after 0 ticks; {save} holds no whole tick\n")
        assert read_save(save).finished

    def test_a_signal_while_calls_wait_at_the_gate_under_the_virtual_clock(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """In this process: SIGINT sent as the first call of tick 3 finishes, the others
        still at the gate or running; ticks 1 and 2 are saved, tick 3 is not."""
        scene = _slow_scene(tmp_path, latency=1.0)
        save = tmp_path / "s.msav"
        call_finished = SaveWriter.call_finished
        sent: list[int] = []

        def signal_in_tick_3(writer: SaveWriter, record: Any) -> None:
            # Once: two calls end at one virtual instant, and a second SIGINT the run
            # had not read when it ended was delivered again after it, as a
            # KeyboardInterrupt in whatever this worker ran next.
            if record.tick == 3 and writer.ticks == 2 and not sent:
                sent.append(signal.SIGINT)
                os.kill(os.getpid(), signal.SIGINT)
            call_finished(writer, record)

        monkeypatch.setattr(SaveWriter, "call_finished", signal_in_tick_3)
        code = main(["run", "--scene", str(scene), "--ticks", "10", "--save", str(save), "--json"])
        out, err = capsys.readouterr()
        assert (code, err) == (130, f"manor: interrupted after 2 ticks; saved to {save}\n")
        figures = json.loads(out)  # the finished ticks' figures, as a whole run's
        assert (figures["ticks"], figures["interrupted"]) == (2, "SIGINT")
        monkeypatch.undo()
        assert _verifies(save, capsys)


class TestRealServer:
    @pytest.mark.parametrize(("signum", "status", "word"), STOPS)
    def test_streams_open_and_remote_runs_are_cancelled(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], signum: int, status: int, word: str
    ) -> None:
        """The cast on a real ``manor serve-agent``: characters on agno runs that would take
        30 s (cancel_remote), narrator and summariser streaming chat completions; a tick
        deadline of 0.5 s lets ticks finish. Signalled mid-tick, every run in flight is
        cancelled on the server (an agno run only by the cancel request), and the server
        itself stops on SIGTERM with its summary."""
        server = _start(["serve-agent", "--capacity", "20", "--latency", "30"], tmp_path, stdout=subprocess.PIPE)
        try:
            assert server.stdout is not None
            url = server.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:"), server.communicate()[1]
            config = tmp_path / "manor.toml"
            config.write_text(
                f'[backends.remote]\nkind = "agno"\nbase_url = "{url}"\nagent_id = "agent"\nworkers = 20\ncancel_remote = true\n'
                f'[backends.chat]\nkind = "openai"\nbase_url = "{url}/v1"\nmodel = "manor"\n'
                '[backend]\ndefault = "remote"\n[agent_backends]\nnarrator = "chat"\nsummariser = "chat"\n'
                "[breaker]\nfailures = 1000000\n",
                encoding="utf-8",
            )
            save = tmp_path / "s.msav"
            argv = ["run", "--config", str(config), "--clock", "real", "--ticks", "100000", "--tick-deadline", "0.5",
                    "--platform-limit", "20", "--save", str(save)]  # fmt: skip
            run = _start(argv, tmp_path)
            _wait_until(run, lambda: _ticks(save) >= 2 and httpx.get(f"{url}/stats").json()["running"] >= 14)
            err = _stop(run, signum)
            ticks = len(read_save(save).ticks)
            assert run.returncode == status
            assert err == f"manor: {word} after {ticks} ticks; saved to {save}\n"
            assert _verifies(save, capsys)
            # Runs of 30 s: one still running now was never cancelled.
            deadline = time.monotonic() + PATIENCE_S
            while (stats := httpx.get(f"{url}/stats").json())["running"] and time.monotonic() < deadline:
                time.sleep(0.05)
            assert (stats["running"], stats["queued"], stats["completed"]) == (0, 0, 0)
            assert stats["cancelled"] == stats["submitted"] > 0
            server_err = _stop(server, signal.SIGTERM)
        finally:
            if server.poll() is None:
                server.kill()
                server.communicate()
        assert server.returncode == 143
        assert server_err.splitlines()[-1].startswith(f"manor serve-agent: stopped; {stats['submitted']} runs,")


class TestOtherCommands:
    @pytest.mark.parametrize(("signum", "status", "word"), STOPS)
    def test_experiment_over_http(self, tmp_path: Path, signum: int, status: int, word: str) -> None:
        """Signalled once its own server and clients are up (their sockets open)."""
        process = _start(["experiment", "bounded-wait", "--http", "--time-scale", "1"], tmp_path)
        _wait_until(process, lambda: _sockets(process.pid) >= 5)
        assert _stop(process, signum) == f"manor: {word}\n"
        assert process.returncode == status

    @pytest.mark.parametrize(("signum", "status", "word"), STOPS)
    def test_bench(self, tmp_path: Path, signum: int, status: int, word: str) -> None:
        """A trio run Manor's CLI does not start itself: signalled after 2 s of CPU
        (imports take well under 1 s; the scheduling suite takes some 20 s)."""
        process = _start(["bench", "--suite", "scheduling", "--json"], tmp_path, stdout=subprocess.PIPE)
        _wait_until(process, lambda: _cpu_seconds(process.pid) >= 2.0)
        out, err = _stop_reading(process, signum)
        assert err == f"manor: {word} during the scheduling suite; no suite had finished\n"
        assert process.returncode == status
        assert json.loads(out)["interrupted"] == {"suite": "scheduling", "signal": signal.Signals(signum).name}

    @pytest.mark.parametrize(("signum", "status", "word"), STOPS)
    def test_bench_keeps_the_suites_done(
        self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, signum: int, status: int, word: str
    ) -> None:
        """Signalled in its second suite (a trio run that would sleep a minute): the
        first suite's figures are printed, the line names the suite it stopped."""
        import attrs
        import trio

        from manor.bench import runner

        async def a_minute() -> None:
            os.kill(os.getpid(), signum)
            await trio.sleep(60)

        def stopped(context: Any) -> dict[str, Any]:
            manor.run.interrupts.run(a_minute)
            raise AssertionError("the signal did not stop the suite")

        monkeypatch.setitem(runner.SUITES, "replay", attrs.evolve(runner.SUITES["replay"], run=stopped))
        code = main(["bench", "--quick", "--suite", "scheduling", "--suite", "replay", "--json"])
        out, err = capsys.readouterr()
        result = json.loads(out)
        assert (code, err) == (status, f"manor: {word} during the replay suite; the figures of scheduling above\n")
        assert result["interrupted"] == {"suite": "replay", "signal": signal.Signals(signum).name}
        assert result["scheduling"]["pipeline"]["efficiency"] > 0 and "replay" not in result
        assert any(target["target"].startswith("scheduling.") for target in result["targets"])

    @pytest.mark.parametrize(("signum", "status", "word"), STOPS)
    def test_replay_mid_tick(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, signum: int, status: int, word: str
    ) -> None:
        """In this process: the signal arrives as the replay finishes its third tick."""
        save = tmp_path / "s.msav"
        assert main(["run", "--scene", str(_slow_scene(tmp_path, 0.5)), "--ticks", "8", "--save", str(save), "--json"]) == 0
        tick_finished = RunStatistics.tick_finished

        def signal_at_tick_3(stats: RunStatistics, record: Any, story: Any) -> None:
            tick_finished(stats, record, story)
            if stats.ticks == 3:
                os.kill(os.getpid(), signum)

        monkeypatch.setattr(RunStatistics, "tick_finished", signal_at_tick_3)
        capsys.readouterr()
        code = main(["replay", str(save), "--verify"])
        assert (code, capsys.readouterr()) == (status, ("", f"manor: {word} after 3 of 8 ticks replayed\n"))

    @pytest.mark.parametrize(("signum", "status", "word"), STOPS)
    @pytest.mark.slow(2.5)
    def test_play_quits_and_closes_its_save(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], signum: int, status: int, word: str
    ) -> None:
        """The dashboard on a pseudo-terminal (Ctrl-C is a key there: SIGINT comes only
        from kill). It quits as ``q`` does; its last line says so."""
        save = tmp_path / "p.msav"
        with _Dashboard(tmp_path, save) as dashboard:
            _wait_until(dashboard.process, lambda: _ticks(save) >= 2)
            dashboard.process.send_signal(signum)
            err = dashboard.ended()
        assert dashboard.process.returncode == status
        assert _after_the_screen(err) == f"manor: {word} after {len(read_save(save).ticks)} ticks; saved to {save}\n"
        assert "Traceback" not in err
        assert _verifies(save, capsys)


class TestPlayWithoutItsTerminal:
    """A dashboard whose terminal goes without a SIGHUP (a pseudo-terminal whose other
    side a killed program closed; the stderr pipe Textual draws on, its reader gone or
    not reading) ends like one hung up, its save kept — it once ran on for ever,
    spinning, and deaf to SIGTERM."""

    @pytest.mark.slow(2.5)
    def test_the_terminal_closed_ends_it_as_a_hang_up(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        save = tmp_path / "p.msav"
        with _Dashboard(tmp_path, save) as dashboard:
            _wait_until(dashboard.process, lambda: _ticks(save) >= 2)
            dashboard.close_the_terminal()
            err = dashboard.ended()
        assert dashboard.process.returncode == 129
        ticks = len(read_save(save).ticks)
        assert _after_the_screen(err) == f"manor: the terminal hung up after {ticks} ticks; saved to {save}\n"
        assert "Traceback" not in err
        assert _verifies(save, capsys)

    @pytest.mark.slow(2.5)
    def test_a_second_signal_puts_the_terminal_back_before_it_ends(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """SIGTERM, then SIGINT before it has quit: the process ends at once, without its
        loop — and so without Textual's way out. It puts the terminal back itself: its
        modes as they were (echo, lines), the dashboard's screen left before the last
        line, which is then on the user's own screen."""
        save = tmp_path / "p.msav"
        with _Dashboard(tmp_path, save) as dashboard:
            assert dashboard.terminal is not None
            before = termios.tcgetattr(dashboard.terminal)
            _wait_until(dashboard.process, lambda: _ticks(save) >= 2)
            assert termios.tcgetattr(dashboard.terminal)[3] & termios.ECHO == 0  # Textual's raw mode
            # Both pending as it goes on (stopped meanwhile), so that it cannot have quit
            # between them; whichever it takes second ends it.
            dashboard.process.send_signal(signal.SIGSTOP)
            _wait_until(dashboard.process, lambda: _state(dashboard.process.pid) == "T")
            dashboard.process.send_signal(signal.SIGTERM)
            dashboard.process.send_signal(signal.SIGINT)
            dashboard.process.send_signal(signal.SIGCONT)
            err = dashboard.ended()
            after = termios.tcgetattr(dashboard.terminal)
        second = {130: "interrupted", 143: "terminated"}[dashboard.process.returncode]
        assert after[3] == before[3] and after[3] & termios.ECHO and after[3] & termios.ICANON
        screen, _, line = err.rpartition(PUT_BACK.decode())
        assert screen and line == f"manor: {second} again; stopped without cleaning up\n"
        assert _verifies(save, capsys)

    @pytest.mark.slow(2.5)
    def test_its_output_gone_ends_it_as_a_hang_up(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """As when the test that started it was killed: both ends closed. No line can be
        read; the status and the save say it all."""
        save = tmp_path / "p.msav"
        with _Dashboard(tmp_path, save) as dashboard:
            _wait_until(dashboard.process, lambda: _ticks(save) >= 2)
            dashboard.close_the_terminal()
            dashboard.close_stderr()
            assert dashboard.process.wait(timeout=PATIENCE_S) == 129
        assert _verifies(save, capsys)

    @pytest.mark.slow(10)
    def test_sigterm_ends_it_while_its_output_is_blocked(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Nobody reads what it draws: its loop waits inside a frame and cannot act on
        the signal. The process ends a few seconds later all the same (its line is lost
        to the full pipe, not the exit status)."""
        save = tmp_path / "p.msav"
        with _Dashboard(tmp_path, save) as dashboard:
            _wait_until(dashboard.process, lambda: _ticks(save) >= 1)
            dashboard.stop_reading_stderr()
            _wait_until(dashboard.process, dashboard.stderr_full)
            dashboard.process.send_signal(signal.SIGTERM)
            assert dashboard.process.wait(timeout=PATIENCE_S) == 143
            err = dashboard.ended()
        assert "Traceback" not in err
        assert _verifies(save, capsys)


#: What ``TestStopSignals`` notes of a call of its ``put_back``.
_PUT_BACK_CALLED = ("the terminal put back", 0)


class TestStopSignals:
    """The dashboard's handlers (in this process, on an asyncio loop): the first signal
    asks the loop to quit; the same again at once changes nothing; another ends the
    process at once; a loop that cannot quit is ended without it."""

    def _run(
        self, monkeypatch: pytest.MonkeyPatch, stuck_s: float, *signums: int, watch: bool = True, quitting_s: float = 0.05
    ) -> tuple[list[int], list[tuple[str, int]]]:
        """Send ``signums`` from a loop callback that then blocks the loop ``stuck_s``
        s, and quits ``quitting_s`` s after; the signals the loop's quit got, and how the
        process would have ended."""
        monkeypatch.setattr(manor.play.stop_signals, "STUCK_AFTER_S", 0.2)
        monkeypatch.setattr(manor.play.stop_signals, "ANSWER_S", 0.5)
        ended: list[tuple[str, int]] = []
        monkeypatch.setattr(manor.run.interrupts, "end_process", lambda line, status: ended.append((line, status)))
        quits: list[int] = []

        async def main() -> None:
            stops = StopSignals(quits.append, lambda: "after 3 ticks", watch=watch, put_back=lambda: ended.append(_PUT_BACK_CALLED))
            stops.take()
            try:
                for signum in signums:
                    os.kill(os.getpid(), signum)
                time.sleep(stuck_s)  # the loop waits inside a callback (a frame)
                await asyncio.sleep(quitting_s)  # and then runs what it was asked to
                stops.disarm()
            finally:
                stops.give_back()

        asyncio.run(main())
        return quits, ended

    def test_the_first_signal_quits_in_the_loop(self, monkeypatch: pytest.MonkeyPatch) -> None:
        assert self._run(monkeypatch, 0.0, signal.SIGTERM) == ([signal.SIGTERM], [])

    def test_the_same_signal_at_once_again_is_one_request(self, monkeypatch: pytest.MonkeyPatch) -> None:
        assert self._run(monkeypatch, 0.0, signal.SIGHUP, signal.SIGHUP) == ([signal.SIGHUP], [])

    def test_another_signal_ends_the_process_at_once(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The terminal put back first: else the shell is left on the dashboard's screen."""
        line = "manor: interrupted again; stopped without cleaning up"
        assert self._run(monkeypatch, 0.0, signal.SIGTERM, signal.SIGINT) == ([signal.SIGTERM], [_PUT_BACK_CALLED, (line, 130)])

    def test_a_loop_that_cannot_quit_is_ended_without_it(self, monkeypatch: pytest.MonkeyPatch) -> None:
        line = "manor: terminated after 3 ticks (the dashboard was stuck: stopped without cleaning up)"
        assert self._run(monkeypatch, 1.5, signal.SIGTERM)[1] == [_PUT_BACK_CALLED, (line, 143)]

    def test_a_loop_still_quitting_is_left_to_it(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """It answers: its cleanup is under way (a remote run being cancelled)."""
        assert self._run(monkeypatch, 0.0, signal.SIGTERM, quitting_s=1.0) == ([signal.SIGTERM], [])

    def test_not_in_a_test_s_process(self, monkeypatch: pytest.MonkeyPatch) -> None:
        assert self._run(monkeypatch, 1.0, signal.SIGTERM, watch=False) == ([signal.SIGTERM], [])


class _Dashboard:
    """``manor play`` on a pseudo-terminal (its stdin and stdout) with stderr a pipe
    (where Textual draws, and the last line goes), both read in threads until told
    to stop; with the slow scene, saving to ``save``."""

    def __init__(self, tmp_path: Path, save: Path) -> None:
        controller, terminal = pty.openpty()
        env = {**_environment(), "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "manor", "play", "--scene", str(_slow_scene(tmp_path, 0.3)), "--save", str(save)],
                stdin=terminal, stdout=terminal, stderr=subprocess.PIPE, cwd=tmp_path, env=env, start_new_session=True,
            )  # fmt: skip
        finally:
            os.close(terminal)
        self.terminal: int | None = controller
        assert self.process.stderr is not None
        self.stderr = self.process.stderr
        self._drawn, self._err = bytearray(), bytearray()
        self._terminal_reader = _Reader(controller, self._drawn)
        self._stderr_reader = _Reader(self.stderr.fileno(), self._err)
        # The bytes waiting in the stderr pipe, and since when (``stderr_full``).
        self._waiting = (0, time.monotonic())

    def __enter__(self) -> _Dashboard:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.close_the_terminal()
        self.close_stderr()

    def close_the_terminal(self) -> None:
        """Close the pseudo-terminal's controlling side: for the dashboard, its terminal
        has gone (not as a SIGHUP: it is not the process's controlling terminal)."""
        self._terminal_reader.stop()  # a read under way would hold it open
        if self.terminal is not None:
            os.close(self.terminal)
            self.terminal = None

    def stop_reading_stderr(self) -> None:
        self._stderr_reader.stop()

    def close_stderr(self) -> None:
        self._stderr_reader.stop()
        self.stderr.close()

    def stderr_full(self) -> bool:
        """Whether what it drew has filled its stderr pipe: nothing more came for a
        second (a pipe holds less than its capacity when full, written in pieces)."""
        waiting = array.array("i", [0])
        fcntl.ioctl(self.stderr.fileno(), termios.FIONREAD, waiting)
        now = time.monotonic()
        if waiting[0] != self._waiting[0]:
            self._waiting = (waiting[0], now)
        return waiting[0] > 0 and now - self._waiting[1] >= 1.0

    def ended(self) -> str:
        """Its stderr, once it has ended (within ``PATIENCE_S``)."""
        self.process.wait(timeout=PATIENCE_S)
        self._stderr_reader.stop()
        self._err += self.stderr.read()
        return self._err.decode(errors="replace")


class _Reader:
    """Read ``fd`` into ``into`` in a thread until its end, or ``stop``."""

    def __init__(self, fd: int, into: bytearray) -> None:
        self._fd, self._into = fd, into
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            while not self._stopped.is_set():
                # Never blocked in a read: ``stop`` returns at once, and a close after it
                # closes the file (a read under way would hold it open).
                if select.select([self._fd], [], [], 0.05)[0]:
                    data = os.read(self._fd, 65536)
                    if not data:
                        return
                    self._into += data
        except OSError:
            pass  # EIO: the other side closed

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()


def _after_the_screen(err: str) -> str:
    """What the process wrote on stderr after the dashboard left the screen."""
    return re.split(r"\x1b\[[0-9;?<>=]*[a-zA-Z]", err)[-1]


class TestUnawaitedCoroutines:
    """The warning an interrupt can leave behind (a coroutine made, never awaited) is
    held back and forgotten when a signal stopped the command, shown otherwise."""

    @staticmethod
    def _leave_a_coroutine() -> None:
        async def never() -> None:
            pass

        never()  # the warning comes when it is collected

    def test_forgotten_after_an_interrupt_shown_otherwise(self) -> None:
        shown: list[str] = []
        with warnings.catch_warnings():  # restores showwarning
            warnings.simplefilter("always")
            warnings.showwarning = lambda message, *rest, **options: shown.append(str(message))
            with unawaited_coroutines_held() as forget:
                self._leave_a_coroutine()
                forget()
            assert shown == []
            with unawaited_coroutines_held():
                self._leave_a_coroutine()
                gc.collect()
                assert shown == []
            assert len(shown) == 1 and "was never awaited" in shown[0]


def test_a_signal_before_the_run_takes_over_still_closes_the_save(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C after the save was created but before the trio run handles signals
    (Python's own KeyboardInterrupt): the same one line, the save closed."""
    def interrupted_at_once(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(manor.run.interrupts, "run", interrupted_at_once)
    save = tmp_path / "s.msav"
    code = main(["run", "--ticks", "3", "--save", str(save), "--json"])
    assert (code, capsys.readouterr()) == (130, ("", f"manor: interrupted after 0 ticks; {save} holds no whole tick\n"))
    recorded = read_save(save)
    assert recorded.finished and not recorded.ticks and not recorded.warnings


class TestNotLost:
    """The one SIGTERM a fleet's parent sends a process it stops is acted on wherever it
    lands. It once landed where it was lost — raised as KeyboardInterrupt inside the Redis
    client's code while the shared gate's server was checked, or inside a finalizer — and
    the process went on to wait for its parent's word to start, for ever (the fleet
    hung: 1 run of the suite in 10 under load)."""

    def test_a_sigterm_lost_in_a_finalizer_still_stops_the_run(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """SIGTERM while Python runs a finalizer (a ``__del__``, a generator the collector
        closes): its ``KeyboardInterrupt`` is raised in there, and Python only reports it
        and goes on. The run that follows stops at once, as if it had come during it."""

        class SignalledWhileFinalized:
            def __del__(self) -> None:
                os.kill(os.getpid(), signal.SIGTERM)  # the handler runs in here

        frozen = manor.run.opening.what_is_built_frozen

        @contextlib.contextmanager
        def finalized_first() -> Iterator[None]:
            SignalledWhileFinalized()  # dropped at once: its __del__ runs now, before the run
            with frozen():
                yield

        lost: list[None] = []
        keep = manor.run.interrupts._keep_lost_interrupt

        def kept() -> None:
            lost.append(None)
            keep()

        monkeypatch.setattr(manor.run.interrupts, "_keep_lost_interrupt", kept)
        monkeypatch.setattr(manor.run.opening, "what_is_built_frozen", finalized_first)
        save = tmp_path / "s.msav"
        code = main(["run", "--scene", str(_slow_scene(tmp_path, latency=1.0)), "--ticks", "3", "--save", str(save)])
        assert lost == [None]  # the window was hit: a KeyboardInterrupt raised in the finalizer
        # Not printed ("Exception ignored in: ..."): the one line, and nothing else.
        assert (code, capsys.readouterr().err) == (143, f"manor: terminated after 0 ticks; {save} holds no whole tick\n")
        assert read_save(save).finished

    @pytest.mark.parametrize("converted", [False, True], ids=["cancelled", "cancelled turned into ConnectionError"])
    def test_a_sigterm_while_the_shared_gate_is_checked_cancels_the_check(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, redis_url: str, converted: bool
    ) -> None:
        """SIGTERM while a command checks that its Redis server answers, before it makes
        any file: the check is cancelled, as every run of a command is, never interrupted
        by a KeyboardInterrupt raised inside the client's code; and what the client
        raises as it is cancelled (coredis turns a handshake cancelled into a
        ConnectionError) is not taken for an unreachable server."""
        import coredis

        seen: list[type[BaseException]] = []
        new_client = RedisGate._new_client

        def signalled_client(gate: RedisGate) -> Any:
            client = new_client(gate)

            async def ping() -> None:
                os.kill(os.getpid(), signal.SIGTERM)
                try:
                    await trio.sleep(PATIENCE_S)  # the client at work when the signal comes
                except BaseException as exc:
                    seen.append(type(exc))
                    if converted and isinstance(exc, trio.Cancelled):
                        raise coredis.exceptions.ConnectionError("Unable to establish a connection") from exc
                    raise

            client.ping = ping
            return client

        monkeypatch.setattr(RedisGate, "_new_client", signalled_client)
        save = tmp_path / "s.msav"
        argv = ["run", "--ticks", "1", "--gate-url", redis_url, "--gate-name", f"checked-{os.getpid()}", "--save", str(save)]
        code = main(argv)
        assert seen == [trio.Cancelled]
        assert (code, capsys.readouterr().err) == (143, "manor: terminated\n")
        assert not save.exists()


    def test_a_signal_as_the_work_ends_is_the_run_s(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A signal that wakes the run's watcher in the last moments of its work: the run
        says it was interrupted, whichever order trio runs its ready tasks in (it draws
        one at random: here each of 100 seeds). The watcher, woken but not yet run when
        the work ended, took the signal from a receiver closed under it: trio's
        ``KeyError``, an internal error of the command."""
        outcomes = set()
        for seed in range(100):
            monkeypatch.setattr(trio._core._run, "_r", random.Random(seed))  # trio's own draw of its batches' order

            async def ends_as_signalled() -> None:
                os.kill(os.getpid(), signal.SIGINT)  # to the receiver: the watcher wakes
                for _ in range(2):  # and the work ends within two turns of the scheduler
                    await trio.lowlevel.cancel_shielded_checkpoint()

            try:
                manor.run.interrupts.run(ends_as_signalled)
            except BaseException as exc:  # noqa: BLE001 - each outcome is counted
                outcomes.add(type(exc).__name__)
            else:
                outcomes.add("returned")
        assert outcomes == {"Interrupted"}


def _catches_sigterm(pid: int) -> bool:
    """Whether the process has a handler for SIGTERM (its ``SigCgt`` mask in /proc):
    Python itself sets none, so this marks the moment Manor's start-up took the signals."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    except OSError:
        pass
    return False


def _console_script(root: Path) -> Path:
    """A ``manor`` script as pip writes one for ``[project.scripts]``."""
    script = root / "bin" / "manor"
    script.parent.mkdir(exist_ok=True)
    script.write_text("import re\nimport sys\nfrom manor.cli import command\nif __name__ == '__main__':\n    sys.exit(command())\n", encoding="utf-8")
    return script


class TestWhileStarting:
    """A signal in the first moments of a command — while Python imports Manor, before the
    run takes the signals — ends it in one line with 128 + the signal, never a traceback
    (it was ``KeyboardInterrupt``'s traceback and −2, or a silent −15)."""

    @pytest.mark.parametrize(("signum", "status", "word"), STOPS)
    @pytest.mark.parametrize("delay", [0.0, 0.02, 0.1, 0.3, 0.6])
    @pytest.mark.parametrize("started_as", ["python -m manor", "the manor script"])
    def test_one_line_at_any_instant(self, tmp_path: Path, signum: int, status: int, word: str, delay: float, started_as: str) -> None:
        command = ["-m", "manor"] if started_as == "python -m manor" else [str(_console_script(tmp_path))]
        process = subprocess.Popen(
            [sys.executable, *command, "run", "--ticks", "40", "--tick-interval", "0.25", "--clock", "real"],
            cwd=tmp_path, env=_environment(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        _wait_until(process, lambda: _catches_sigterm(process.pid))
        time.sleep(delay)  # from the marker on, whatever the machine's load: inside the imports, or later
        err = _stop(process, signum)
        assert process.returncode == status, err
        assert "Traceback" not in err and err.count("\n") == 1 and err.startswith(f"manor: {word}"), err

    @pytest.mark.parametrize(("signum", "status", "line"), [(signal.SIGTERM, 143, "manor: terminated\n"), (signal.SIGINT, 130, "manor: interrupted\n")])
    def test_a_signal_before_the_command_takes_sigint_is_said_as_itself(
        self, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], signum: int, status: int, line: str
    ) -> None:
        """In this process: a signal in the instant between the command taking SIGTERM
        (``sigterm_as_interrupt``) and SIGINT (``startup.handed_over``), or after it gave
        SIGINT back, when the start-up's handler still has SIGINT. It ends the process as
        the signal's own: a SIGTERM was said as "interrupted", 130 (1 run of 8 of
        ``test_one_line_at_any_instant`` under load)."""

        class Ended(Exception):
            pass

        def ended(status: int) -> None:
            raise Ended(status)

        monkeypatch.setattr(manor.run.startup.os, "_exit", ended)  # not the test's process
        previous = signal.signal(signal.SIGINT, manor.run.startup.stop_at_once)
        try:
            with pytest.raises(Ended) as caught, manor.run.interrupts.sigterm_as_interrupt():
                os.kill(os.getpid(), signum)
                time.sleep(PATIENCE_S)  # the handler runs here, in this thread
        finally:
            signal.signal(signal.SIGINT, previous)
        assert (caught.value.args, capfd.readouterr().err) == ((status,), line)

    def test_a_program_importing_manor_keeps_its_handlers(self, tmp_path: Path) -> None:
        probe = "import signal, manor; print(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
        done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=_environment(), capture_output=True, text=True, timeout=PATIENCE_S)
        assert done.stdout == "True True\n", done.stderr

    def test_an_ignored_sigint_stays_ignored(self, tmp_path: Path) -> None:
        """A background job of a script starts with SIGINT ignored: the start-up keeps it so."""
        process = subprocess.Popen(
            [sys.executable, "-m", "manor", "run", "--ticks", "2"], cwd=tmp_path, env=_environment(),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        )  # fmt: skip
        _wait_until(process, lambda: _catches_sigterm(process.pid))
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=PATIENCE_S) == 0


class TestSignalledTwice:
    """``timeout -s TERM`` signals the process and then its process group: the same
    SIGTERM twice, an instant apart. That is one request: the cleanup goes on (it ended
    one time in four as "terminated again; stopped without cleaning up", no figures).
    A second Ctrl-C from a hand, or a repeat after the grace, still stops at once."""

    def _run(self, monkeypatch: pytest.MonkeyPatch, first: int, second: int, after_s: float) -> tuple[list[str], list[int]]:
        """Signal the run with ``first``; from inside its cleanup, ``after_s`` later,
        with ``second``. What the cleanup did, and the signals that would have ended the
        process at once."""
        exits: list[int] = []
        monkeypatch.setattr(manor.run.interrupts, "exit_now", exits.append)  # not the test's process
        done: list[str] = []

        async def work() -> None:
            try:
                os.kill(os.getpid(), first)
                await trio.sleep_forever()
            finally:
                with trio.CancelScope(shield=True):
                    time.sleep(after_s)  # a cleanup under way, on the real clock
                    os.kill(os.getpid(), second)
                    for _ in range(20):  # time for the watcher to see it
                        await trio.sleep(0.01)
                    done.append("cleaned up")

        with pytest.raises(manor.run.interrupts.Interrupted) as caught:
            manor.run.interrupts.run(work)
        assert caught.value.signum == first
        return done, exits

    def test_sigterm_sent_twice_at_once_lets_the_cleanup_finish(self, monkeypatch: pytest.MonkeyPatch) -> None:
        # "At once" is within the grace however late a loaded machine runs the cleanup.
        monkeypatch.setitem(manor.run.interrupts.REPEAT_GRACE_S, signal.SIGTERM, PATIENCE_S)
        assert self._run(monkeypatch, signal.SIGTERM, signal.SIGTERM, 0.0) == (["cleaned up"], [])

    def test_sigterm_again_after_the_grace_stops_at_once(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setitem(manor.run.interrupts.REPEAT_GRACE_S, signal.SIGTERM, 0.05)
        assert self._run(monkeypatch, signal.SIGTERM, signal.SIGTERM, 0.2)[1] == [signal.SIGTERM]

    def test_ctrl_c_pressed_twice_stops_at_once(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A hand is never faster than the grace: 0.15 s between two presses."""
        assert self._run(monkeypatch, signal.SIGINT, signal.SIGINT, 0.15)[1] == [signal.SIGINT]

    def test_another_signal_stops_at_once(self, monkeypatch: pytest.MonkeyPatch) -> None:
        assert self._run(monkeypatch, signal.SIGTERM, signal.SIGINT, 0.0)[1] == [signal.SIGINT]
