import java.util.Arrays;
import java.util.Properties;
import java.util.Random;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Kafka's side of bench/transactions.py: one phase of rounds with Kafka's own Java producer, the same
 * rounds as the bench sends lakelog.
 *
 * <p>A round is {@code records} records of {@code valueBytes} bytes over {@code partitions} partitions
 * (1,000 over 3 = 334 + 333 + 333, the first partitions one more), sent with {@code send()} and then
 * {@code flush()}: the producer sends each partition's records as one batch ({@code batch.size} 1 MiB),
 * the partitions' batches in flight together, and the round waits for every acknowledgement, as the
 * bench's HTTP producer waits for its three answers. An idempotent phase ({@code enable.idempotence},
 * {@code acks=all}) stops there; a transactional phase ({@code transactional.id}) wraps the round in
 * {@code beginTransaction()} and, after the flush, {@code commitTransaction()} (EndTxn, answered once the
 * coordinator wrote PrepareCommit; Kafka writes the markers after its answer). The next round begins once
 * the commit returned.
 *
 * <p>Arguments: bootstrap, {@code idempotent|transactional}, topic, warm-up seconds, timed seconds,
 * records per round, value bytes, partitions. Prints three lines: {@code kind rounds records seconds
 * retries} (retries: the producer's {@code record-retry-total} over the timed rounds, batches sent again
 * after a retriable error), then each timed round's milliseconds, then each timed commit's (empty in an
 * idempotent phase), space-separated: the bench takes their percentiles as it takes lakelog's.
 */
public final class TransactionRounds {
    private TransactionRounds() {
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        boolean transactional = args[1].equals("transactional");
        String topic = args[2];
        double warmupSeconds = Double.parseDouble(args[3]);
        double seconds = Double.parseDouble(args[4]);
        int records = Integer.parseInt(args[5]);
        int valueBytes = Integer.parseInt(args[6]);
        int partitions = Integer.parseInt(args[7]);

        Properties config = new Properties();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ProducerConfig.ACKS_CONFIG, "all");
        config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        config.put(ProducerConfig.BATCH_SIZE_CONFIG, 1 << 20);
        config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        if (transactional) {
            config.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "bench-" + topic);
            config.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 60_000);
        }
        // A few distinct rounds of values, made before the clock starts.
        Random random = new Random(valueBytes);
        byte[][][] values = new byte[4][records][valueBytes];
        for (byte[][] round : values) {
            for (byte[] value : round) {
                random.nextBytes(value);
            }
        }
        int[] sizes = new int[partitions];
        for (int p = 0; p < partitions; p++) {
            sizes[p] = records / partitions + (p < records % partitions ? 1 : 0);
        }
        double[] roundMs = new double[1024];
        double[] commitMs = new double[1024];
        int timedRounds = 0;
        long timedRecords = 0;
        double timedSeconds;
        double retries = 0;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(config)) {
            if (transactional) {
                producer.initTransactions();
            }
            long warmupEnd = System.nanoTime() + (long) (warmupSeconds * 1e9);
            long start = 0;
            long end = Long.MAX_VALUE;
            for (int k = 0; ; k++) {
                long now = System.nanoTime();
                if (start == 0 && now >= warmupEnd) {
                    start = now;
                    retries = metric(producer, "record-retry-total");
                    end = start + (long) (seconds * 1e9);
                }
                if (now >= end) {
                    timedSeconds = (now - start) / 1e9;
                    retries = metric(producer, "record-retry-total") - retries;
                    break;
                }
                byte[][] round = values[k % values.length];
                long t0 = System.nanoTime();
                if (transactional) {
                    producer.beginTransaction();
                }
                int i = 0;
                for (int p = 0; p < partitions; p++) {
                    for (int r = 0; r < sizes[p]; r++) {
                        producer.send(new ProducerRecord<>(topic, p, null, round[i++]));
                    }
                }
                producer.flush();
                long t1 = System.nanoTime();
                if (transactional) {
                    producer.commitTransaction();
                }
                long t2 = System.nanoTime();
                if (start != 0) {
                    if (timedRounds == roundMs.length) {
                        roundMs = Arrays.copyOf(roundMs, 2 * timedRounds);
                        commitMs = Arrays.copyOf(commitMs, 2 * timedRounds);
                    }
                    roundMs[timedRounds] = (t1 - t0) / 1e6;
                    commitMs[timedRounds] = (t2 - t1) / 1e6;
                    timedRounds++;
                    timedRecords += records;
                }
            }
        }
        System.out.printf("%s %d %d %.3f %.0f%n", args[1], timedRounds, timedRecords, timedSeconds, retries);
        System.out.println(joined(roundMs, timedRounds));
        System.out.println(transactional ? joined(commitMs, timedRounds) : "");
    }

    /** The first {@code n} of {@code values}, space-separated. */
    private static String joined(double[] values, int n) {
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < n; i++) {
            out.append(i == 0 ? "" : " ").append(String.format("%.4f", values[i]));
        }
        return out.toString();
    }

    /** The producer's metric {@code name} of group {@code producer-metrics} (0 when it has none). */
    private static double metric(KafkaProducer<byte[], byte[]> producer, String name) {
        for (java.util.Map.Entry<MetricName, ? extends Metric> e : producer.metrics().entrySet()) {
            if (e.getKey().name().equals(name) && e.getKey().group().equals("producer-metrics")) {
                return ((Number) e.getValue().metricValue()).doubleValue();
            }
        }
        return 0;
    }
}
