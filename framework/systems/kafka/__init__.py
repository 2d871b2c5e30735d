"""Kafka through aiokafka: `system.KafkaSystem` and the parts it is built from.

`admin` (metadata, topics, offsets), `consumer` (manual assignment, read_committed),
`produce` (placement and batches), `txn` / `fencing` / `txn_filter` (exactly-once), `table`
(compacted metadata topics read as tables). Importing this package does not import aiokafka.
"""
