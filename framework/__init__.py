"""sampan's runtime: task API, systems, stores, checkpoints, coordinator, workers, CLI."""
