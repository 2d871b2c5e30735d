"""The job coordinator: coordinator stream, job-model builder, monitor and supervisor."""
