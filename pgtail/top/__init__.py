"""`pgtail top`: a live view of the server's logical replication.

Pure: `model` turns looks from `pgtail.catalog.activity` (and, with --publication, the
counts `changes` makes of a temporary slot's pgoutput messages) into a view model,
with the root cause per slot from `pgtail.doctor.slot_causes`; `render` lays it out with rich
at any width down to 80 columns. `looks` is the one module that reads: it takes each look
through `pgtail.catalog` and gives one view per look; the command (`pgtail.cli.top_cmd`)
only shows them.
"""
