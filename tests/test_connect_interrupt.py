"""Ctrl-C while libpq is still connecting (a host that takes the TCP connection and never
answers, as a firewall or a hung server does): pgtail stops at once with one line and
exit 130, in the stream (its own signal handling) and in the other commands
(KeyboardInterrupt), rather than when libpq gives up."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A DSN whose host accepts the connection and never says a word."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    try:
        yield f"host=127.0.0.1 port={listener.getsockname()[1]} dbname=x"
    finally:
        listener.close()


def _interrupted(args: list[str]) -> tuple[int, str]:
    """Run pgtail, wait until it is connecting, send SIGINT as a terminal does, and
    return its exit status and stderr. A pgtail that ignores the signal until libpq
    gives up never ends while the listener holds the connection: the timeout fails it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pgtail", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        # a terminal's default SIGINT (a shell's background job would ignore it)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
    )
    try:
        # started and blocked in connect: its stderr says nothing yet
        with pytest.raises(subprocess.TimeoutExpired):
            proc.communicate(timeout=3)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err.decode()


def test_ctrl_c_while_the_stream_connects(silent_server: str) -> None:
    code, err = _interrupted(["stream", "--slot", "x", "--dsn", silent_server])
    assert code == 130
    assert err.strip().splitlines() == [
        "pgtail: stopped: cancelled the wait to connect to the server (nothing was left behind)"
    ]


@pytest.mark.parametrize("command", [["slot", "list"], ["slot", "create", "y"], ["doctor"]])
def test_ctrl_c_while_a_command_connects(silent_server: str, command: list[str]) -> None:
    code, err = _interrupted([*command, "--dsn", silent_server])
    assert code == 130
    assert err.strip().splitlines() == ["pgtail: stopped (interrupted)"]


_PENDING_STOP = """
import io, signal, sys
from pgtail import catalog
from pgtail.stream import StreamConfig, run
catalog.set_stop_check(lambda: signal.SIGINT)  # a caller's flag handler saw a Ctrl-C
try:
    result = run(StreamConfig(dsn=sys.argv[1], slot="x"), io.BytesIO())
    print("result", result.reason, int(result.signal or 0))
except Exception as exc:
    print(type(exc).__name__, int(exc.args[0]), exc.args[1], sep="|")
"""


def test_a_stop_pending_when_the_stream_starts_stops_it(silent_server: str) -> None:
    """A signal that came before the stream took the signals over (`pgtail demo` notes it
    with a flag until then) is the stream's first signal: the stream gives up its connect
    at once instead of streaming on as if nothing had come."""
    done = subprocess.run(
        [sys.executable, "-c", _PENDING_STOP, silent_server],
        capture_output=True,
        timeout=20,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == f"Interrupted|{signal.SIGINT}|connect to the server"


def test_ctrl_c_with_its_stderr_gone(silent_server: str) -> None:
    """`pgtail slot list 2>&1 | tee log` and Ctrl-C, which ends tee too: click writes a
    line end to the closed stderr on the interrupt, and that BrokenPipeError was taken
    for a reader gone from stdout (`| head`: exit 0). The interrupt's 130 stands."""
    import os

    read, write = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pgtail", "slot", "list", "--dsn", silent_server],
        stdout=write,
        stderr=write,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
    )
    os.close(write)
    try:
        with pytest.raises(subprocess.TimeoutExpired):  # blocked in connect
            proc.wait(timeout=3)
        os.close(read)  # tee is gone
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
