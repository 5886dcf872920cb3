"""A malformed shared-gate URL is one line naming it and what is wrong — from a flag, a
MANOR_ variable or manor.toml — not ``manor: internal error`` from the Redis client."""

from __future__ import annotations

import pytest

from manor.cli import main
from manor.limits import gate_url_problem

pytestmark = pytest.mark.usefixtures("isolated")

BAD = {
    "redis://localhost:99999/0": "the port must be a number from 1 to 65535",
    "redis://localhost:abc": "the port must be a number from 1 to 65535",
    "redis://localhost:0": "the port must be a number from 1 to 65535",
    "redis://": "no host (redis://HOST:PORT/DB)",
    "rediss:///0": "no host (rediss://HOST:PORT/DB)",
    "redis://localhost:6379/x": "the database after the host must be a number, not 'x'",
    "redis://localhost:6379/0?db=abc": "?db= must be a number, not 'abc'",
    "redis://localhost?db=": "?db= must be a number, not ''",
    "redis://[::1": "not a URL: Invalid IPv6 URL",
    "unix://": "no socket path (unix:///path/to/redis.sock)",
}


@pytest.mark.parametrize("url", BAD)
def test_a_flag_names_the_url_and_what_is_wrong(capsys: pytest.CaptureFixture[str], url: str) -> None:
    assert main(["run", "--ticks", "0", "--gate-url", url]) == 1
    assert capsys.readouterr().err == f"manor: error: command line: --gate-url: bad value {url!r}: {BAD[url]}\n"


def test_the_environment_too_and_no_password_is_shown(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MANOR_GATE_URL", "redis://me:hunter22@redis.example:70000/1")
    assert main(["run", "--ticks", "0"]) == 1
    err = capsys.readouterr().err
    assert err == "manor: error: environment: MANOR_GATE_URL: bad value 'redis://me:***@redis.example:70000/1': the port must be a number from 1 to 65535\n"


@pytest.mark.parametrize("url", ["", "redis://localhost", "redis://localhost:6379/2", "rediss://h:1/0?db=3", "unix:///run/redis.sock", "redis://[::1]:6379"])
def test_good_urls_pass(url: str) -> None:
    assert gate_url_problem(url) is None
