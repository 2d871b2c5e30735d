"""The enrichment example: a job folder (job file, task module, drill scenario, checkers)."""
