"""Real server processes for integration tests: start, wait until ready, log, always stop."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

REPO_ROOT = Path(__file__).resolve().parents[2]
LOG_TAIL_CHARS = 20_000

# Processes started and not yet stopped, so a failed test can show their logs and an
# interpreter exit that skips fixture teardown still stops them.
_live: list[ManagedProcess] = []


# Linux: the child asks for SIGTERM when its parent dies (prctl PR_SET_PDEATHSIG, kept across
# exec), so a test run killed with SIGTERM/SIGKILL, which skips every cleanup, leaves no server
# behind. It checks the parent is still the one given, in case it died before the prctl.
_PDEATHSIG_LAUNCHER = """\
import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
if os.getppid() != int(sys.argv[1]):
    sys.exit(1)
os.execvp(sys.argv[2], sys.argv[2:])
"""


def _guarded(command: Sequence[str]) -> list[str]:
    if sys.platform != "linux":
        return list(command)
    return [sys.executable, "-c", _PDEATHSIG_LAUNCHER, str(os.getpid()), *command]


class ProcessStartupError(RuntimeError):
    """A managed process exited or did not become ready before its deadline."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (the kernel picks it; the socket is closed again)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def django_env(settings_module: str, **extra: str) -> dict[str, str]:
    """This process's environment with Django settings, unbuffered output and extra values."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": settings_module,
        "PYTHONUNBUFFERED": "1",  # log lines reach the log file as they are written
        **extra,
    }


def run_django(args: Sequence[str], env: Mapping[str, str], timeout: float = 60) -> str:
    """Run ``python -m django <args>`` to completion; its output, or an error that shows it."""
    result = subprocess.run(
        [sys.executable, "-m", "django", *args],
        cwd=REPO_ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    output = result.stdout + result.stderr
    if result.returncode != 0:
        raise RuntimeError(f"django {' '.join(args)} exited {result.returncode}:\n{output}")
    return output


def http_ready(url: str, timeout: float = 1.0) -> Callable[[], bool]:
    """A readiness check: True once ``GET url`` answers 2xx."""

    def check() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                return 200 <= response.status < 300
        except (OSError, urllib.error.URLError):
            return False  # refused, reset or not yet answering: not ready

    return check


def tcp_ready(host: str, port: int, timeout: float = 1.0) -> Callable[[], bool]:
    """A readiness check: True once ``host:port`` accepts a TCP connection."""

    def check() -> bool:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return True
        except OSError:
            return False

    return check


class ManagedProcess:
    """A subprocess in its own process group, with a log file and a readiness check.

    Use it as a context manager: ``__enter__`` starts it and waits until ``ready()`` is true
    (no fixed sleeps: it polls until ``startup_timeout``); ``__exit__`` always stops it,
    whether the block ended normally, with a failure or with KeyboardInterrupt. On Linux the
    process also gets SIGTERM if the thread that started it dies: start it from the main
    thread (pytest fixtures run there), not from a short-lived worker thread.
    """

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path = REPO_ROOT,
        ready: Callable[[], bool] | None = None,
        startup_timeout: float = 30.0,
        stop_timeout: float = 10.0,
        log_dir: Path | None = None,
    ) -> None:
        self.name = name
        self.command = list(command)
        self.env = dict(env) if env is not None else dict(os.environ)
        self.cwd = cwd
        self.ready = ready
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        log_dir = log_dir or Path(tempfile.mkdtemp(prefix="a2a-it-"))
        self.log_path = log_dir / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> Self:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                _guarded(self.command),
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() signals all of it
            )
        _live.append(self)
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        delay = 0.02
        while True:
            if self.returncode is not None:
                raise ProcessStartupError(self._describe(f"exited with {self.returncode}"))
            if self.ready is None or self.ready():
                return
            if time.monotonic() >= deadline:
                raise ProcessStartupError(
                    self._describe(f"not ready after {self.startup_timeout} s")
                )
            time.sleep(delay)  # a poll interval, bounded by the deadline above
            delay = min(delay * 2, 0.25)

    def stop(self) -> int | None:
        """SIGTERM the process group, wait up to ``stop_timeout``, then SIGKILL it."""
        process = self.process
        if process is None:
            return None
        with contextlib.suppress(ValueError):
            _live.remove(self)
        if process.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                process.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                self._note(f"did not stop within {self.stop_timeout} s of SIGTERM: SIGKILL")
        # Children that outlived the leader are in the same group: kill what is left.
        self._signal_group(signal.SIGKILL)
        return process.wait(timeout=self.stop_timeout)

    def _signal_group(self, signum: int) -> None:
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signum)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # --- state and output -----------------------------------------------------------------

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def log_text(self, limit: int = LOG_TAIL_CHARS) -> str:
        """The end of what the process wrote to stdout and stderr."""
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return text if len(text) <= limit else "[...]\n" + text[-limit:]

    def _note(self, line: str) -> None:
        with self.log_path.open("a") as log:
            log.write(f"\n[integration harness] {self.name} {line}\n")

    def _describe(self, what: str) -> str:
        command = " ".join(self.command)
        return f"{self.name} ({command}) {what}. Its output ({self.log_path}):\n{self.log_text()}"


class DaphneServer(ManagedProcess):
    """``daphne -b host -p port <application>``, ready once ``ready_path`` answers 2xx.

    ``backlog`` sets the listen backlog (through a Twisted endpoint string instead).
    """

    def __init__(
        self,
        application: str,
        *,
        env: Mapping[str, str],
        host: str = "127.0.0.1",
        port: int | None = None,
        ready_path: str = "/.well-known/agent-card.json",
        name: str = "daphne",
        backlog: int | None = None,
        **options: Any,
    ) -> None:
        self.host = host
        self.port = port or free_port(host)
        listen = ["-b", host, "-p", str(self.port)]
        if backlog is not None:
            # Twisted listens with a backlog of 50: too few for hundreds of clients that
            # connect at once (a full accept queue drops or resets their connections).
            listen = ["-e", f"tcp:port={self.port}:interface={host}:backlog={backlog}"]
        command = [sys.executable, "-m", "daphne", *listen, application]
        super().__init__(name, command, env=env, ready=http_ready(self.url(ready_path)), **options)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def url(self, path: str = "/") -> str:
        return self.base_url + path


def delete_redis_keys(redis_url: str, prefix: str) -> None:
    """Delete every key under ``prefix`` (a test run's channel layer, broker and bus keys)."""
    import redis

    with redis.Redis.from_url(redis_url) as client:
        for key in client.scan_iter(match=f"{prefix}*", count=1000):
            client.delete(key)


def live_processes() -> list[ManagedProcess]:
    """The managed processes started and not yet stopped."""
    return list(_live)


@contextlib.contextmanager
def running(*processes: ManagedProcess) -> Iterator[tuple[ManagedProcess, ...]]:
    """Start ``processes`` in order; stop all that started, in reverse order, however it ends."""
    with contextlib.ExitStack() as stack:
        for process in processes:
            stack.enter_context(process)
        yield processes


@atexit.register
def _stop_leftovers() -> None:
    for process in reversed(live_processes()):
        process.stop()
