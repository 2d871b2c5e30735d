"""The embedded local log: one SQLite file in WAL mode shared by a job's processes on one machine.

`system.LocalSystem` is the `System`; `log` holds the database (batches, commits, fences),
`fetch` the reads, `batch` the record codec, `compact`, `schema` and `migrate` the upkeep.
"""
