"""The worker: runs a job model's tasks on one process — fetch, process, window, commit."""
