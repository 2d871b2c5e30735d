"""Several hosts over Kafka: `sampan run JOB --host NAME` on each machine forms one job.

Membership is Kafka's own group protocol (`membership`); the group leader builds the job
model (`leader`, `placement`); every host runs the tasks placed on it with its own
supervised workers and keeps standby and warmup copies current (`host`, `replicas`).
"""
