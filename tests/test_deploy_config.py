"""deploy/: the nginx site passes ``nginx -t`` and proxies SSE unbuffered; units and Procfile.

``render_nginx_conf`` turns deploy/nginx.conf into a complete config for a throwaway nginx on
loopback ports (``nginx_command`` runs it): the integration suite uses it too, so the file
under test is the one a deployment installs.
"""

from __future__ import annotations

import configparser
import grp
import json
import os
import pwd
import re
import secrets
import shlex
import shutil
import ssl
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from a2a_endpoint.conf import DEFAULTS
from a2a_endpoint.testing import jsonrpc_request, user_message
from tests.integration.servers import (
    DaphneServer,
    ManagedProcess,
    django_env,
    free_port,
    run_django,
    tcp_ready,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
DEPLOY = REPO_ROOT / "deploy"
NGINX_SITE = DEPLOY / "nginx.conf"
SYSTEMD = DEPLOY / "systemd"
# Where the units and the site expect the checkout (docs/deployment.md).
INSTALL_DIR = "/srv/a2a-endpoint"

# The parts of deploy/nginx.conf that render_nginx_conf replaces, exactly as written there.
UPSTREAM_SERVERS = "    server 127.0.0.1:8001;\n    server 127.0.0.1:8002;\n"
REDIRECT_LISTEN = "    listen 80;\n    listen [::]:80;\n"
SITE_LISTEN = "    listen 443 ssl http2;\n    listen [::]:443 ssl http2;\n"
CERTIFICATE = (
    "    ssl_certificate /etc/letsencrypt/live/agent.example.com/fullchain.pem;\n"
    "    ssl_certificate_key /etc/letsencrypt/live/agent.example.com/privkey.pem;\n"
)
STATIC_ALIAS = f"alias {INSTALL_DIR}/staticfiles/;"

MAIN_CONF = """\
# Rendered from deploy/nginx.conf by tests/test_deploy_config.py (render_nginx_conf).
daemon off;
worker_processes 1;
{user}pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{
    worker_connections 1024;
}}
http {{
    types {{
        text/html html;
        text/css css;
        application/javascript js;
        image/svg+xml svg;
        image/png png;
    }}
    default_type application/octet-stream;
    access_log {prefix}/access.log;
    client_body_temp_path {prefix}/temp/client_body;
    proxy_temp_path {prefix}/temp/proxy;
    fastcgi_temp_path {prefix}/temp/fastcgi;
    uwsgi_temp_path {prefix}/temp/uwsgi;
    scgi_temp_path {prefix}/temp/scgi;
    # As in Debian's /etc/nginx/nginx.conf: the endpoint's location must turn it off.
    gzip on;

{site}
}}
"""


# --- rendering and running (also used by tests/integration) ---------------------------------


def _replace_once(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise ValueError(
            f"deploy/nginx.conf no longer contains exactly one {old.strip()!r}: update "
            "tests/test_deploy_config.py (render_nginx_conf) with it"
        )
    return text.replace(old, new)


def render_nginx_conf(
    prefix: Path,
    *,
    upstreams: Sequence[str],
    port: int,
    redirect_port: int,
    static_root: Path,
    certificate: tuple[Path, Path] | None = None,
) -> Path:
    """Write ``prefix/nginx.conf``: deploy/nginx.conf inside a main config for a test nginx.

    Only these change: the upstream's servers (``"127.0.0.1:8001"`` or ``"unix:/path"``), the
    listen lines (the site on 127.0.0.1:``port``, over TLS with ``certificate`` = (cert, key),
    plain HTTP without; the HTTP-to-HTTPS server on ``redirect_port``), the certificate and
    the static root. Everything under test (the proxy directives) is the file as written.
    Paths nginx writes (pid, logs, temp files) are under ``prefix``.
    """
    site = NGINX_SITE.read_text()
    servers = "".join(f"    server {address};\n" for address in upstreams)
    site = _replace_once(site, UPSTREAM_SERVERS, servers)
    site = _replace_once(site, REDIRECT_LISTEN, f"    listen 127.0.0.1:{redirect_port};\n")
    tls = " ssl http2" if certificate else ""
    site = _replace_once(site, SITE_LISTEN, f"    listen 127.0.0.1:{port}{tls};\n")
    certificate_lines = (
        f"    ssl_certificate {certificate[0]};\n    ssl_certificate_key {certificate[1]};\n"
        if certificate
        else ""
    )
    site = _replace_once(site, CERTIFICATE, certificate_lines)
    site = _replace_once(site, STATIC_ALIAS, f"alias {static_root}/;")
    # Run as root (CI), workers would switch to nobody, who cannot read the temp dirs.
    user = ""
    if os.geteuid() == 0:
        user = f"user {pwd.getpwuid(0).pw_name} {grp.getgrgid(0).gr_name};\n"
    (prefix / "temp").mkdir(parents=True, exist_ok=True)
    conf = prefix / "nginx.conf"
    conf.write_text(MAIN_CONF.format(prefix=prefix, user=user, site=site))
    return conf


def nginx_binary() -> str | None:
    """nginx on PATH or in /usr/sbin (often not on a non-root PATH)."""
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")


def nginx_command(conf: Path, *options: str) -> list[str]:
    """The command running ``conf`` (from render_nginx_conf) in the foreground."""
    binary = nginx_binary()
    if binary is None:
        raise FileNotFoundError("nginx is not installed")
    return [binary, "-p", str(conf.parent), "-c", str(conf), *options]


def require_nginx() -> str:
    binary = nginx_binary()
    if binary is None:
        reason = "nginx is not installed (apt-get install nginx)"
        if os.environ.get("A2A_REQUIRE_SERVICES") == "1":
            pytest.fail(f"{reason} (A2A_REQUIRE_SERVICES=1)")
        pytest.skip(reason)
    return binary


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """A certificate and key for 127.0.0.1, made with the cryptography package."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


# --- a small reader of nginx's syntax, to assert on directives ------------------------------


@dataclass
class Block:
    """A directive with its arguments; a block directive also has children."""

    name: str
    args: list[str]
    children: list[Block] = field(default_factory=list)

    def all(self, name: str) -> list[Block]:
        return [child for child in self.children if child.name == name]

    def one(self, name: str) -> Block:
        found = self.all(name)
        assert len(found) == 1, f"{self.name} {self.args}: {len(found)} '{name}' directives"
        return found[0]

    def value(self, name: str) -> list[str]:
        return self.one(name).args

    def headers(self) -> dict[str, str]:
        return {d.args[0].lower(): d.args[1] for d in self.all("proxy_set_header")}


TOKEN = re.compile(r'#[^\n]*|"(?:[^"\\]|\\.)*"|[{};]|[^\s{};"#]+')


def parse_nginx(text: str) -> Block:
    """The directives of an nginx config as a tree (comments dropped, quotes removed)."""
    root = Block("root", [])
    stack, words = [root], []
    for token in TOKEN.findall(text):
        if token.startswith("#"):
            continue
        if token in {";", "{"}:
            block = Block(words[0], words[1:])
            stack[-1].children.append(block)
            if token == "{":
                stack.append(block)
            words = []
        elif token == "}":
            stack.pop()
        else:
            words.append(token[1:-1] if token.startswith('"') else token)
    assert len(stack) == 1, "unbalanced braces"
    assert not words, "a directive without its semicolon"
    return root


def seconds(value: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
    number, unit = re.fullmatch(r"(\d+)(ms|s|m|h|d)?", value).groups()
    return int(number) * units[unit or "s"]


def size_bytes(value: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([kKmMgG])?", value).groups()
    return int(number) * {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[(unit or "").lower()]


@pytest.fixture(scope="module")
def site() -> Block:
    return parse_nginx(NGINX_SITE.read_text())


def tls_server(site: Block) -> Block:
    (server,) = [s for s in site.all("server") if any("ssl" in d.args for d in s.all("listen"))]
    return server


def location(server: Block, *args: str) -> Block:
    (found,) = [loc for loc in server.all("location") if loc.args == list(args)]
    return found


# --- the nginx site, as written ------------------------------------------------------------


def test_upstream_lists_two_daphnes_kept_alive_over_http_1_1(site: Block) -> None:
    upstream = site.one("upstream")
    assert upstream.args == ["a2a_daphne"]
    assert [s.args for s in upstream.all("server")] == [["127.0.0.1:8001"], ["127.0.0.1:8002"]]
    assert int(upstream.value("keepalive")[0]) > 0
    server = tls_server(site)
    # Upstream keep-alive needs HTTP/1.1 and no "Connection: close" passed on.
    assert server.value("proxy_http_version") == ["1.1"]
    assert server.headers()["connection"] == ""


def test_forwarded_headers_are_set_by_nginx(site: Block) -> None:
    """Django trusts X-Forwarded-Proto/Host (settings): nginx must always overwrite them."""
    headers = tls_server(site).headers()
    assert headers["x-forwarded-proto"] == "$scheme"
    assert headers["x-forwarded-for"] == "$proxy_add_x_forwarded_for"
    assert headers["host"] in {"$host", "$http_host"}
    assert headers["x-forwarded-host"] in {"$host", "$http_host"}


def test_proxied_locations_inherit_the_headers(site: Block) -> None:
    """One proxy_set_header in a location would drop every inherited one there."""
    server = tls_server(site)
    proxied = [loc for loc in server.all("location") if loc.all("proxy_pass")]
    assert {tuple(loc.args) for loc in proxied} >= {("/a2a",), ("/",), ("=", "/healthz")}
    for loc in proxied:
        assert loc.all("proxy_set_header") == [], loc.args
        assert loc.value("proxy_pass") == ["http://a2a_daphne"]


def test_the_endpoint_location_streams_sse_unbuffered(site: Block) -> None:
    endpoint = location(tls_server(site), "/a2a")
    assert endpoint.value("proxy_buffering") == ["off"]
    assert endpoint.value("proxy_cache") == ["off"]
    assert endpoint.value("gzip") == ["off"]
    assert seconds(endpoint.value("proxy_read_timeout")[0]) >= 3600
    assert seconds(endpoint.value("proxy_send_timeout")[0]) >= 3600


def test_metrics_are_not_proxied(site: Block) -> None:
    """/metrics (and anything under it) never reaches a daphne through nginx."""
    blocked = location(tls_server(site), "/metrics")
    assert blocked.value("return") == ["404"]
    assert blocked.all("proxy_pass") == []


def test_body_limit_matches_max_request_bytes(site: Block) -> None:
    server = tls_server(site)
    limit = DEFAULTS["MAX_REQUEST_BYTES"]
    assert size_bytes(server.value("client_max_body_size")[0]) == limit
    assert size_bytes(location(server, "/a2a").value("client_max_body_size")[0]) == limit


def test_static_files_and_https_redirect(site: Block) -> None:
    server = tls_server(site)
    assert location(server, "/static/").value("alias") == [f"{INSTALL_DIR}/staticfiles/"]
    assert server.value("ssl_certificate")[0].endswith(".pem")
    assert server.value("ssl_certificate_key")[0].endswith(".pem")
    (redirect,) = [s for s in site.all("server") if s is not server]
    assert location(redirect, "/").value("return") == ["301", "https://$host$request_uri"]


# --- nginx -t on rendered copies ------------------------------------------------------------


def nginx_test(conf: Path) -> None:
    result = subprocess.run(
        nginx_command(conf, "-t"), capture_output=True, text=True, timeout=30, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "test is successful" in result.stderr


def test_rendered_plain_http_site_passes_nginx_t(tmp_path: Path) -> None:
    require_nginx()
    conf = render_nginx_conf(
        tmp_path,
        upstreams=["127.0.0.1:18001", "unix:/run/a2a/daphne-2.sock"],
        port=free_port(),
        redirect_port=free_port(),
        static_root=tmp_path / "static",
    )
    rendered = conf.read_text()
    assert "server unix:/run/a2a/daphne-2.sock;" in rendered
    assert "ssl_certificate" not in rendered
    nginx_test(conf)


def test_rendered_tls_site_passes_nginx_t(tmp_path: Path) -> None:
    require_nginx()
    certificate = self_signed_certificate(tmp_path)
    conf = render_nginx_conf(
        tmp_path,
        upstreams=["127.0.0.1:18001", "127.0.0.1:18002"],
        port=free_port(),
        redirect_port=free_port(),
        static_root=tmp_path / "static",
        certificate=certificate,
    )
    nginx_test(conf)


def test_rendering_fails_loudly_when_the_site_changes(tmp_path: Path, monkeypatch) -> None:
    changed = tmp_path / "nginx.conf"
    changed.write_text(NGINX_SITE.read_text().replace("server 127.0.0.1:8002;", ""))
    monkeypatch.setattr(sys.modules[__name__], "NGINX_SITE", changed)
    with pytest.raises(ValueError, match=re.escape("server 127.0.0.1:8001")):
        render_nginx_conf(
            tmp_path, upstreams=["a:1"], port=1, redirect_port=2, static_root=tmp_path
        )


# --- live: nginx (TLS) in front of daphne serving the sample project ------------------------


@dataclass
class Stack:
    base_url: str
    static_root: Path


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """nginx over TLS on loopback, proxying to one daphne (SQLite, inline backend).

    The long_job demo takes 100 s per step here: a stream's first event can only arrive
    through nginx while the job runs if nothing on the way buffers the response.
    """
    require_nginx()
    workdir = tmp_path_factory.mktemp("deploy-stack")
    static_root = workdir / "static"
    # Only what is set here configures the project (not this shell's DATABASE_URL & co).
    env = {
        name: value
        for name, value in django_env("project.settings").items()
        if name == "DJANGO_SETTINGS_MODULE" or name not in names_read_by_settings()
    }
    env.update(
        A2A_DEMO_DB=str(workdir / "db.sqlite3"),
        DJANGO_STATIC_ROOT=str(static_root),
        DEMO_LONG_JOB_STEP_SECONDS="100",
    )
    run_django(["migrate", "--noinput"], env)
    run_django(["collectstatic", "--noinput"], env)
    daphne = DaphneServer(
        "project.asgi:application", env=env, log_dir=workdir, ready_path="/healthz"
    )
    port = free_port()
    conf = render_nginx_conf(
        workdir,
        upstreams=[f"127.0.0.1:{daphne.port}"],
        port=port,
        redirect_port=free_port(),
        static_root=static_root,
        certificate=self_signed_certificate(workdir),
    )
    nginx = ManagedProcess(
        "nginx", nginx_command(conf), ready=tcp_ready("127.0.0.1", port), log_dir=workdir
    )
    with daphne, nginx:
        yield Stack(f"https://127.0.0.1:{port}", static_root)


def https_client(stack: Stack) -> httpx.Client:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the test's self-signed certificate
    return httpx.Client(base_url=stack.base_url, verify=context, timeout=20)


@pytest.mark.integration
def test_card_advertises_the_public_https_url(stack: Stack) -> None:
    """X-Forwarded-Proto and the Host with its port reach Django: the card names nginx."""
    with https_client(stack) as client:
        card = client.get("/.well-known/agent-card.json").json()
    assert card["supportedInterfaces"][0]["url"] == f"{stack.base_url}/a2a/"


@pytest.mark.integration
def test_health_and_static_files_through_nginx(stack: Stack) -> None:
    with https_client(stack) as client:
        health = client.get("/healthz")
        css = client.get("/static/admin/css/base.css")
    assert health.status_code == 200
    assert health.json() == {
        "status": "ok",
        "database": "ok",
        "channel_layer": "not configured",
        "broker": "not configured",
    }
    assert css.status_code == 200
    assert css.content == (stack.static_root / "admin/css/base.css").read_bytes()


@pytest.mark.integration
def test_metrics_are_refused_by_nginx(stack: Stack) -> None:
    """The daphne serves /metrics here (DEBUG is on); nginx does not pass it on."""
    with https_client(stack) as client:
        for path in ("/metrics", "/metrics/", "/%6Detrics"):
            assert client.get(path).status_code == 404, path


@pytest.mark.integration
def test_stream_events_pass_nginx_while_the_job_runs(stack: Stack) -> None:
    params = {"message": user_message("/long_job")}
    with https_client(stack) as client:
        request = jsonrpc_request("SendStreamingMessage", params, "s1")
        with client.stream("POST", "/a2a/", json=request, headers={"A2A-Version": "1.0"}) as sse:
            assert sse.headers["content-type"].startswith("text/event-stream")
            lines = sse.iter_lines()
            first = next(line for line in lines if line.startswith("data:"))
            task = json.loads(first.removeprefix("data:"))["result"]["task"]
            # The job sleeps 100 s before its first step: the event came through unbuffered.
            cancel = jsonrpc_request("CancelTask", {"id": task["id"]}, "c1")
            answer = client.post("/a2a/", json=cancel, headers={"A2A-Version": "1.0"}).json()
            assert answer["result"]["status"]["state"] == "TASK_STATE_CANCELED"
            rest = [json.loads(line[5:]) for line in lines if line.startswith("data:")]
    states = [e["result"].get("statusUpdate", {}).get("status", {}).get("state") for e in rest]
    assert states[-1] == "TASK_STATE_CANCELED"


# --- systemd units and Procfile -------------------------------------------------------------


def read_unit(name: str) -> configparser.ConfigParser:
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.optionxform = str  # keys are case-sensitive in systemd
    unit.read_string((SYSTEMD / name).read_text())
    assert set(unit.sections()) == {"Unit", "Service", "Install"}
    return unit


def exec_start(unit: configparser.ConfigParser) -> list[str]:
    command = shlex.split(unit["Service"]["ExecStart"])
    program = Path(command[0])
    # The unit runs the checkout's virtualenv; this one has the same programs.
    assert program.parent == Path(INSTALL_DIR, ".venv", "bin"), program
    assert (Path(sys.executable).parent / program.name).exists(), program.name
    assert unit["Service"]["WorkingDirectory"] == INSTALL_DIR
    assert unit["Service"]["EnvironmentFile"] == "/etc/a2a-endpoint/env"
    assert unit["Service"]["User"] == "a2a"
    return [program.name, *command[1:]]


def test_daphne_unit_serves_the_asgi_application_on_its_instance_port() -> None:
    command = exec_start(read_unit("a2a-daphne@.service"))
    assert command[0] == "daphne"
    assert command[-1] == "project.asgi:application"
    assert command[command.index("-b") + 1] == "127.0.0.1"  # nginx is the only client
    assert command[command.index("-p") + 1] == "%i"
    assert "--proxy-headers" in command


def test_celery_unit_runs_the_project_app() -> None:
    unit = read_unit("a2a-celery.service")
    command = exec_start(unit)
    assert command[:4] == ["celery", "-A", "project", "worker"]
    assert command[command.index("--concurrency") + 1] == "${CELERY_CONCURRENCY}"
    assert unit["Service"]["Environment"].startswith("CELERY_CONCURRENCY=")
    # SIGTERM to the main process only: Celery's warm shutdown.
    assert unit["Service"]["KillMode"] == "mixed"


def test_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    """The units with this checkout's paths and user, checked by systemd itself."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    user = pwd.getpwuid(os.getuid()).pw_name
    group = grp.getgrgid(os.getgid()).gr_name
    env_file = tmp_path / "env"
    env_file.write_text("CELERY_CONCURRENCY=2\n")
    paths = []
    for source, name in [
        ("a2a-daphne@.service", "a2a-daphne@8001.service"),
        ("a2a-celery.service", "a2a-celery.service"),
    ]:
        text = (SYSTEMD / source).read_text()
        text = text.replace(f"{INSTALL_DIR}/.venv/bin", str(Path(sys.executable).parent))
        text = text.replace(INSTALL_DIR, str(REPO_ROOT)).replace(
            "/etc/a2a-endpoint/env", str(env_file)
        )
        text = text.replace("User=a2a", f"User={user}").replace("Group=a2a", f"Group={group}")
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))
    result = subprocess.run(
        [analyze, "verify", "--man=no", *paths],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    problems = [line for line in result.stderr.splitlines() if str(tmp_path) in line]
    assert result.returncode == 0, result.stderr
    assert problems == [], result.stderr


def procfile() -> dict[str, list[str]]:
    entries = {}
    for line in (DEPLOY / "Procfile").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, command = line.partition(":")
            entries[name.strip()] = shlex.split(command)
    return entries


def test_procfile_runs_the_asgi_application_and_the_project_worker() -> None:
    entries = procfile()
    assert set(entries) == {"web", "worker", "beat"}
    assert entries["web"][0] == "daphne"
    assert entries["web"][-1] == "project.asgi:application"
    assert entries["worker"][:4] == ["celery", "-A", "project", "worker"]
    assert entries["beat"][:4] == ["celery", "-A", "project", "beat"]  # the retention purge


def test_entry_points_named_by_the_units_exist() -> None:
    import project
    from project.asgi import application

    assert callable(application)
    assert project.celery_app.main == "project"
    # What `celery -A project worker` does at startup: autodiscovery finds a2a_endpoint.tasks.
    project.celery_app.loader.import_default_modules()
    assert {
        "a2a_endpoint.run_agent_task",
        "a2a_endpoint.stop_canceled_job",
        "a2a_endpoint.recover_lost_jobs",
    } <= set(project.celery_app.tasks)


# --- env.example ----------------------------------------------------------------------------


def env_example() -> dict[str, str]:
    values = {}
    for line in (DEPLOY / "env.example").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, sep, value = line.partition("=")
            assert sep, line
            assert re.fullmatch(r"[A-Z][A-Z0-9_]*", name), line
            values[name] = value
    return values


def documented_names() -> set[str]:
    text = (DEPLOY / "env.example").read_text()
    return set(re.findall(r"^#?([A-Z][A-Z0-9_]*)=", text, flags=re.MULTILINE))


def names_read_by_settings() -> set[str]:
    source = (REPO_ROOT / "project" / "settings.py").read_text()
    calls = re.findall(r'(?:os\.environ\.get|_env_\w+)\(\s*"([A-Z][A-Z0-9_]*)"', source)
    table = re.findall(r'"(A2A_[A-Z0-9_]+)": \(', source)
    return set(calls) | set(table)


def test_env_example_documents_every_variable_the_settings_read() -> None:
    read = names_read_by_settings()
    assert {"DATABASE_URL", "REDIS_URL", "DJANGO_SECRET_KEY", "A2A_JOB_LEASE"} <= read
    assert read - documented_names() == set()


def test_env_example_passes_check_deploy() -> None:
    """The example, with a real secret, is a configuration Django finds nothing wrong with."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "A2A_", "DB_", "CELERY_"))
        and key not in {"DATABASE_URL", "REDIS_URL"}
    }
    env.update(env_example())
    env["DJANGO_SECRET_KEY"] = secrets.token_urlsafe(50)
    env["DJANGO_SETTINGS_MODULE"] = "project.settings"
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout
