"""Cost curves (issue 51 §3): how sampan's costs grow with workers, tasks and state.

    python -m bench.curves [workers|tasks|state|failover ...] [--full] [--no-kafka]

Each curve is measured by its module (`workers`, `tasks`, `state`, `failover`), kept as a
JSON table under ``bench/curves/results/`` and drawn by `plot` into
``docs/img/curves-<name>.png`` with the command and the machine in the caption.
"""
