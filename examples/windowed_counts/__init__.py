"""The windowed_counts example: a job folder (job file, task module, drill scenario, checkers)."""
