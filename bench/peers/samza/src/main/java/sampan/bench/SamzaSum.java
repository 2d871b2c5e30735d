package sampan.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Instant;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.samza.application.LegacyTaskApplication;
import org.apache.samza.config.MapConfig;
import org.apache.samza.context.Context;
import org.apache.samza.job.ApplicationStatus;
import org.apache.samza.runtime.LocalApplicationRunner;
import org.apache.samza.storage.kv.KeyValueStore;
import org.apache.samza.system.IncomingMessageEnvelope;
import org.apache.samza.system.OutgoingMessageEnvelope;
import org.apache.samza.system.SystemStream;
import org.apache.samza.task.InitableTask;
import org.apache.samza.task.MessageCollector;
import org.apache.samza.task.StreamTask;
import org.apache.samza.task.TaskCoordinator;

/**
 * The per-key sum as a Samza low-level task: a bench/peers peer (expansion runs), never part
 * of sampan.
 *
 * <p>Standalone: LocalApplicationRunner with the PassthroughJobCoordinator (one processor, no
 * ZooKeeper), GroupByPartition, a RocksDB store with its changelog, Kafka checkpoints, a
 * commit every second. Each record of {@code --input} (string key, JSON {@code {"amount": n}})
 * adds to its key's total, and the total (JSON) goes to {@code --output}. Runs until SIGTERM
 * or until Samza stops it, then prints one {@code PEER-REPORT} line: records processed, the
 * wall-clock second of the first, and the error Samza stopped with, if any.
 */
public final class SamzaSum {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final AtomicLong PROCESSED = new AtomicLong();
    private static volatile double firstWall;

    private SamzaSum() {
    }

    /** Adds each record's amount to its key's total and sends the total. */
    public static final class SumTask implements StreamTask, InitableTask {
        private KeyValueStore<String, Long> totals;
        private SystemStream output;

        @Override
        @SuppressWarnings("unchecked")
        public void init(Context context) {
            totals = (KeyValueStore<String, Long>) context.getTaskContext().getStore("totals");
            output = new SystemStream("kafka",
                    context.getJobContext().getConfig().get("bench.output"));
        }

        @Override
        public void process(IncomingMessageEnvelope envelope, MessageCollector collector,
                            TaskCoordinator coordinator) {
            String key = (String) envelope.getKey();
            long amount;
            try {
                amount = JSON.readTree((String) envelope.getMessage()).get("amount").asLong();
            } catch (IOException error) {
                throw new UncheckedIOException(error);
            }
            Long before = totals.get(key);
            long total = (before == null ? 0L : before) + amount;
            totals.put(key, total);
            collector.send(new OutgoingMessageEnvelope(output, key, Long.toString(total)));
            if (PROCESSED.incrementAndGet() == 1) {
                Instant now = Instant.now();
                firstWall = now.getEpochSecond() + now.getNano() / 1e9;
            }
        }
    }

    static Map<String, String> config(Map<String, String> options) {
        String name = options.get("name");
        Map<String, String> c = new HashMap<>();
        c.put("job.name", name);
        c.put("job.id", "1");
        c.put("app.name", name);
        c.put("app.id", "1");
        c.put("processor.id", "0");
        c.put("job.coordinator.factory",
                "org.apache.samza.standalone.PassthroughJobCoordinatorFactory");
        c.put("task.name.grouper.factory",
                "org.apache.samza.container.grouper.task.SingleContainerGrouperFactory");
        c.put("job.systemstreampartition.grouper.factory",
                "org.apache.samza.container.grouper.stream.GroupByPartitionFactory");
        c.put("task.class", SumTask.class.getName());
        c.put("task.inputs", "kafka." + options.get("input"));
        c.put("task.commit.ms", options.getOrDefault("commit-ms", "1000"));
        c.put("bench.output", options.get("output"));
        c.put("job.default.system", "kafka");
        c.put("systems.kafka.samza.factory", "org.apache.samza.system.kafka.KafkaSystemFactory");
        c.put("systems.kafka.consumer.bootstrap.servers", options.get("bootstrap"));
        c.put("systems.kafka.producer.bootstrap.servers", options.get("bootstrap"));
        c.put("systems.kafka.consumer.auto.offset.reset", "earliest");
        c.put("systems.kafka.consumer.metadata.max.age.ms",
                options.getOrDefault("metadata-refresh-ms", "5000"));
        c.put("systems.kafka.samza.offset.default", "oldest");
        c.put("systems.kafka.default.stream.replication.factor", "1");
        c.put("systems.kafka.samza.key.serde", "string");
        c.put("systems.kafka.samza.msg.serde", "string");
        c.put("serializers.registry.string.class",
                "org.apache.samza.serializers.StringSerdeFactory");
        c.put("serializers.registry.long.class", "org.apache.samza.serializers.LongSerdeFactory");
        c.put("task.checkpoint.factory",
                "org.apache.samza.checkpoint.kafka.KafkaCheckpointManagerFactory");
        c.put("task.checkpoint.system", "kafka");
        c.put("task.checkpoint.replication.factor", "1");
        c.put("job.coordinator.system", "kafka");
        c.put("job.coordinator.replication.factor", "1");
        c.put("stores.totals.factory",
                "org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory");
        c.put("stores.totals.key.serde", "string");
        c.put("stores.totals.msg.serde", "long");
        c.put("stores.totals.changelog", "kafka." + name + "-totals-changelog");
        c.put("stores.totals.changelog.replication.factor", "1");
        c.put("job.logged.store.base.dir", options.get("state-dir"));
        c.put("job.non-logged.store.base.dir", options.get("state-dir"));
        return c;
    }

    public static void main(String[] args) {
        Map<String, String> options = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            options.put(args[i].substring(2), args[i + 1]);
        }
        LocalApplicationRunner runner = new LocalApplicationRunner(
                new LegacyTaskApplication(SumTask.class.getName()), new MapConfig(config(options)));
        Thread mainThread = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            runner.kill();
            try {
                mainThread.join(120_000);
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
        }));
        String error = null;
        try {
            runner.run();
            runner.waitForFinish();
            ApplicationStatus status = runner.status();
            if (status.getStatusCode() == ApplicationStatus.StatusCode.UnsuccessfulFinish) {
                error = describe(status.getThrowable());
            }
        } catch (RuntimeException failure) {
            error = describe(failure);
        }
        Map<String, Object> report = new HashMap<>();
        report.put("records", PROCESSED.get());
        report.put("first_s", firstWall);
        report.put("error", error);
        try {
            System.out.println("PEER-REPORT " + JSON.writeValueAsString(report));
        } catch (IOException impossible) {
            throw new UncheckedIOException(impossible);
        }
        System.out.flush();
    }

    static String describe(Throwable error) {
        if (error == null) {
            return "Samza finished unsuccessfully without saying why";
        }
        StringBuilder text = new StringBuilder();
        for (Throwable cause = error; cause != null; cause = cause.getCause()) {
            if (text.length() > 0) {
                text.append(" <- caused by ");
            }
            text.append(cause.getClass().getSimpleName()).append(": ").append(cause.getMessage());
            if (cause.getCause() == cause) {
                break;
            }
        }
        return text.toString();
    }
}
