package sampan.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * The per-key sum job in Kafka Streams: a bench/peers peer, never part of sampan.
 *
 * <p>One stream thread reads {@code --input} (string keys, JSON values {@code {"amount": n}}),
 * keeps each key's running total in a persistent RocksDB store with its changelog (behind the
 * record cache, {@code statestore.cache.max.bytes} at its default: writes reach RocksDB and the
 * changelog deduplicated at each commit, as sampan's write buffer does), and sends the total
 * (JSON) to {@code --output} for every record. It stops cleanly after {@code --count}
 * records (0: on SIGTERM) and prints one JSON line: records processed, wall-clock and process
 * CPU seconds at the first record and when closed, and the error that stopped it, if any.
 * Its consumers refresh metadata every {@code --metadata-refresh-ms} (5 s, not the client's
 * 5 min), so that an expansion of the input is seen while the bench runs.
 */
public final class SumApp {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final AtomicLong PROCESSED = new AtomicLong();
    private static final CountDownLatch STOP = new CountDownLatch(1);
    private static final AtomicReference<String> ERROR = new AtomicReference<>();
    private static volatile double firstWall;
    private static volatile double firstCpu;
    private static volatile double lastWall;
    private static volatile double midWall;
    private static volatile double midCpu;
    private static long count;

    private SumApp() {
    }

    static double wallSeconds() {
        Instant now = Instant.now();
        return now.getEpochSecond() + now.getNano() / 1e9;
    }

    static double cpuSeconds() {
        var bean = (com.sun.management.OperatingSystemMXBean)
                ManagementFactory.getOperatingSystemMXBean();
        return bean.getProcessCpuTime() / 1e9;
    }

    /** Adds each record's amount to its key's total and forwards the total. */
    static final class SumProcessor implements Processor<String, byte[], String, byte[]> {
        private ProcessorContext<String, byte[]> context;
        private KeyValueStore<String, Long> totals;

        @Override
        public void init(ProcessorContext<String, byte[]> context) {
            this.context = context;
            this.totals = context.getStateStore("totals");
        }

        @Override
        public void process(Record<String, byte[]> record) {
            long amount;
            byte[] encoded;
            try {
                amount = JSON.readTree(record.value()).get("amount").asLong();
                Long before = totals.get(record.key());
                long total = (before == null ? 0L : before) + amount;
                totals.put(record.key(), total);
                encoded = JSON.writeValueAsBytes(total);
            } catch (IOException error) {
                throw new UncheckedIOException(error);
            }
            context.forward(record.withValue(encoded));
            long done = PROCESSED.incrementAndGet();
            if (done == 1) {
                firstWall = wallSeconds();
                firstCpu = cpuSeconds();
            }
            if (done == count / 2) {
                midWall = wallSeconds();
                midCpu = cpuSeconds();
            }
            if (done == count) {
                lastWall = wallSeconds();
                STOP.countDown();
            }
        }
    }

    static Map<String, String> arguments(String[] args) {
        Map<String, String> parsed = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --name value pairs, got " + args[i]);
            }
            parsed.put(args[i].substring(2), args[i + 1]);
        }
        return parsed;
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> options = arguments(args);
        count = Long.parseLong(options.getOrDefault("count", "0"));
        String guarantee = options.getOrDefault("guarantee", "at-least-once");
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, options.get("app-id"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, options.get("bootstrap"));
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.STATE_DIR_CONFIG, options.get("state-dir"));
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, options.getOrDefault("commit-ms", "1000"));
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG,
                guarantee.equals("exactly-once") ? StreamsConfig.EXACTLY_ONCE_V2
                                                 : StreamsConfig.AT_LEAST_ONCE);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.METADATA_MAX_AGE_CONFIG),
                options.getOrDefault("metadata-refresh-ms", "5000"));

        StreamsBuilder builder = new StreamsBuilder();
        builder.addStateStore(Stores.keyValueStoreBuilder(
                Stores.persistentKeyValueStore("totals"), Serdes.String(), Serdes.Long())
                .withCachingEnabled());
        builder.stream(options.get("input"), Consumed.with(Serdes.String(), Serdes.ByteArray()))
                .process(SumProcessor::new, "totals")
                .to(options.get("output"), Produced.with(Serdes.String(), Serdes.ByteArray()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setUncaughtExceptionHandler(error -> {
            ERROR.compareAndSet(null, describe(error));
            STOP.countDown();
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.ERROR) {
                ERROR.compareAndSet(null, "Kafka Streams went from " + before + " to ERROR");
                STOP.countDown();
            }
        });
        Thread mainThread = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            STOP.countDown();
            try {
                mainThread.join(120_000);
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
        }));
        try {
            streams.start();
        } catch (RuntimeException error) {
            ERROR.compareAndSet(null, describe(error));
            STOP.countDown();
        }
        STOP.await();
        streams.close(Duration.ofSeconds(60));
        double doneWall = wallSeconds();
        double doneCpu = cpuSeconds();
        Map<String, Object> report = new HashMap<>();
        report.put("records", PROCESSED.get());
        report.put("first_s", firstWall);
        report.put("last_s", lastWall);
        report.put("mid_s", midWall);
        report.put("cpu_mid_s", midCpu);
        report.put("done_s", doneWall);
        report.put("cpu_first_s", firstCpu);
        report.put("cpu_done_s", doneCpu);
        report.put("error", ERROR.get());
        System.out.println("PEER-REPORT " + JSON.writeValueAsString(report));
        System.out.flush();
    }

    static String describe(Throwable error) {
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
