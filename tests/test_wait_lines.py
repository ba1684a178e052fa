"""The line pgtail says while it waits on the server (`catalog.describe_wait`)."""

from __future__ import annotations

from pgtail.catalog import Blocker, WaitFacts, describe_wait

HOLDER = Blocker(4242, "7391", 190.0, "psql", "idle in transaction")


def test_a_lock_wait_names_the_lock_the_holder_and_the_fix() -> None:
    line = describe_wait("read the tables to copy", WaitFacts("Lock", "relation", (HOLDER,)), 2.0)
    assert line.startswith("pgtail: waiting 2s to read the tables to copy (a lock on a relation):")
    assert "PID 4242 (xid 7391, open 0:03:10, application_name 'psql'" in line
    assert "state idle in transaction" in line
    assert "SELECT pg_terminate_backend(4242)" in line and line.endswith("Ctrl-C cancels")


def test_a_slot_creation_wait_names_no_lock() -> None:
    """A slot's creation waits on the transaction itself (a transactionid lock): the
    line names the transaction, not a lock."""
    facts = WaitFacts("Lock", "transactionid", (HOLDER,))
    line = describe_wait("create replication slot 's'", facts, 12.0)
    assert "lock on" not in line
    assert line.startswith("pgtail: waiting 12s to create replication slot 's': it waits for")
