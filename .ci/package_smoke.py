"""Package smoke test: build the wheel and sdist, install each into a fresh virtualenv, use it.

Run by `make package-check` (and so by .ci/run) with the dev virtualenv's python, which has
`build`. Outside the checkout, in a temporary directory, so the source tree is not importable:

1. `python -m build` makes the sdist, then the wheel from the unpacked sdist (so the sdist
   holds all that building needs); the wheel's files and metadata and the sdist's files are
   checked.
2. Virtualenv "wheel": the wheel with [channels,celery,server], at requirements.txt's pins.
   Virtualenv "sdist": the sdist with no extras, at the lowest versions pyproject.toml allows.
   Both install from pip's configured index, as `make venv` does.
3. In each, .ci/smoke_site (the README's quickstart: an echo agent, SQLite) runs
   `manage.py check` and `migrate`, then probe.py's requests through Django's test client;
   the "wheel" one also serves it with daphne and the Channels bus, reads a stream, and checks
   the Celery backend's settings and jobs.

Any failure ends the run with exit status 1 and the failing command's output.
KEEP_SMOKE_DIR=1 keeps the temporary directory.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import tomllib
import venv
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parent.parent
SITE = REPO / ".ci" / "smoke_site"
PACKAGE = "a2a_endpoint"
REQUIRED_EXTRAS = {"channels", "celery", "server", "drf", "postgres", "all"}
SDIST_REQUIRED = {"README.md", "CHANGELOG.md", "LICENSE", "pyproject.toml", "PKG-INFO"}
LEFT_OUT = ("tests/", "bench/", "project/")
DAPHNE_DEADLINE_S = 30.0


class SmokeError(Exception):
    """A check failed: the message says what and shows what was found."""


def run(cmd: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    """Run a command; its combined output, or SmokeError with that output."""
    done = subprocess.run(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    if done.returncode != 0:
        raise SmokeError(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stdout[-6000:]}")
    return done.stdout


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without anything that points back at the checkout or its virtualenv."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return {**env, **extra}


def build(out: Path) -> tuple[Path, Path]:
    run([sys.executable, "-m", "build", "--outdir", str(out), str(REPO)], cwd=out.parent)
    wheels, sdists = sorted(out.glob("*.whl")), sorted(out.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        raise SmokeError(f"expected one wheel and one sdist in {out}: {os.listdir(out)}")
    return wheels[0], sdists[0]


def package_files() -> set[str]:
    """Every file of the package in the source tree, as the wheel names it."""
    return {
        path.relative_to(REPO).as_posix()
        for path in (REPO / PACKAGE).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


def wheel_problems(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        meta = archive.read(f"{dist_info}/METADATA").decode()
    problems = [f"not in the wheel: {name}" for name in sorted(package_files() - names)]
    problems += [
        f"in the wheel but not the package: {name}"
        for name in sorted(names)
        if name.split("/")[0] not in {PACKAGE, dist_info}
    ]
    for must in ("py.typed", "migrations/0001_initial.py", "management/commands/__init__.py"):
        if f"{PACKAGE}/{must}" not in names:
            problems.append(f"not in the wheel: {PACKAGE}/{must}")
    if f"{dist_info}/licenses/LICENSE" not in names:
        problems.append("not in the wheel: the LICENSE file")
    return problems + metadata_problems(meta)


def metadata_problems(meta: str) -> list[str]:
    extras = set(re.findall(r"^Provides-Extra: (\S+)$", meta, re.M))
    urls = set(re.findall(r"^Project-URL: ([^,]+),", meta, re.M))
    problems = [f"extra missing from the metadata: {e}" for e in sorted(REQUIRED_EXTRAS - extras)]
    if "License-Expression: Apache-2.0" not in meta:
        problems.append("metadata: no License-Expression: Apache-2.0")
    problems += [
        f"metadata: no Project-URL {u}" for u in ("Homepage", "Changelog") if u not in urls
    ]
    return problems


def sdist_problems(sdist: Path) -> list[str]:
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    problems = [f"not in the sdist: {name}" for name in sorted(SDIST_REQUIRED - names)]
    if not any(name.startswith("docs/") for name in names):
        problems.append("not in the sdist: docs/")
    problems += [f"in the sdist: {n}" for n in sorted(names) if n.startswith(LEFT_OUT)]
    return problems


def pinned() -> dict[str, str]:
    """requirements.txt's pins as constraints (a constraint may not name extras)."""
    pins = {}
    for line in (REPO / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate():
                pins[canonicalize_name(req.name)] = f"{req.name}{req.specifier}"
    return pins


def lowest() -> dict[str, str]:
    """pyproject.toml's core dependencies at their lower bounds (the pin where none)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins, lows = pinned(), {}
    for line in project["dependencies"]:
        req = Requirement(line)
        bound = [s.version for s in req.specifier if s.operator == ">="]
        name = canonicalize_name(req.name)
        lows[name] = f"{req.name}=={bound[0]}" if bound else pins[name]
    return lows


def make_venv(where: Path, requirement: str, constraints: dict[str, str]) -> Path:
    venv.EnvBuilder(with_pip=False, clear=True).create(where)
    python = where / "bin" / "python"
    pins = where.with_suffix(".constraints.txt")
    pins.write_text("\n".join(constraints.values()) + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet"]
    run([*pip, "-c", str(pins), requirement], env=clean_env())
    return python


def use_site(python: Path, site: Path, *, stack: str = "") -> None:
    """Copy the smoke project out, check it, migrate it, probe it through the test client."""
    shutil.copytree(SITE, site, ignore=shutil.ignore_patterns("__pycache__"))
    env = clean_env(SMOKE_STACK=stack)
    print(run([str(python), "manage.py", "check"], cwd=site, env=env).strip())
    run([str(python), "manage.py", "migrate", "--noinput"], cwd=site, env=env)
    print(run([str(python), "probe.py", "client"], cwd=site, env=env).strip())


def celery_settings(python: Path, site: Path) -> None:
    """The Celery backend's settings pass the system checks (E010: Celery is importable)."""
    env = clean_env(SMOKE_STACK="celery")
    print(run([str(python), "manage.py", "check"], cwd=site, env=env).strip())
    print(run([str(python), "probe.py", "celery"], cwd=site, env=env).strip())


def serve(python: Path, site: Path) -> None:
    """daphne (the [server] extra) with the Channels bus, one process, a port of its own."""
    daphne = python.parent / "daphne"
    endpoint = "tcp:port=0:interface=127.0.0.1"
    cmd = [str(daphne), "-e", endpoint, "smoke_site.asgi:application"]
    env = clean_env(SMOKE_STACK="channels", PYTHONPATH=str(site))
    server = subprocess.Popen(
        cmd, cwd=site, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines: queue.Queue[str] = queue.Queue()
    log: list[str] = []
    threading.Thread(
        target=lambda: [lines.put(line) for line in server.stdout], daemon=True
    ).start()
    try:
        port = wait_for_port(server, lines, log)
        out = run([str(python), "probe.py", "http", f"http://127.0.0.1:{port}"], cwd=site, env=env)
        print(out.strip())
    except SmokeError as exc:
        raise SmokeError(f"{exc}\ndaphne's log:\n{''.join(log)[-4000:]}") from exc
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def wait_for_port(server: subprocess.Popen[str], lines: queue.Queue[str], log: list[str]) -> int:
    deadline = time.monotonic() + DAPHNE_DEADLINE_S
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.2)
        except queue.Empty:
            if server.poll() is not None:
                raise SmokeError(f"daphne exited {server.returncode} before listening") from None
            continue
        log.append(line)
        found = re.search(r"Listening on TCP address [\d.]+:(\d+)", line)
        if found:
            return int(found.group(1))
    raise SmokeError(f"daphne did not listen within {DAPHNE_DEADLINE_S:.0f} s")


def step(timings: list[tuple[str, float]], name: str, started: float) -> float:
    now = time.monotonic()
    timings.append((name, now - started))
    print(f"--- {name}: {now - started:.1f} s", flush=True)
    return now


def smoke(tmp: Path) -> list[tuple[str, float]]:
    timings: list[tuple[str, float]] = []
    t = time.monotonic()
    wheel, sdist = build(tmp / "dist")
    problems = wheel_problems(wheel) + sdist_problems(sdist)
    if problems:
        raise SmokeError("the built files:\n  " + "\n  ".join(problems))
    print(f"built and checked {wheel.name} and {sdist.name}")
    t = step(timings, "build and inspect", t)

    python = make_venv(tmp / "venv-wheel", f"{wheel}[channels,celery,server]", pinned())
    t = step(timings, "install the wheel with [channels,celery,server] (pinned)", t)
    use_site(python, tmp / "site-wheel")
    celery_settings(python, tmp / "site-wheel")
    serve(python, tmp / "site-wheel")
    t = step(timings, "check, migrate, test client, Celery settings, daphne", t)

    lows = lowest()
    print("lowest versions: " + ", ".join(lows.values()))
    python = make_venv(tmp / "venv-sdist", str(sdist), lows)
    t = step(timings, "install the sdist, no extras (lowest versions)", t)
    use_site(python, tmp / "site-sdist")
    step(timings, "check, migrate, test client", t)
    return timings


def main() -> int:
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="a2a-package-smoke-"))
    try:
        smoke(tmp)
    except SmokeError as exc:
        print(f"\nPACKAGE SMOKE TEST FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        if os.environ.get("KEEP_SMOKE_DIR"):
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"package smoke test passed in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
