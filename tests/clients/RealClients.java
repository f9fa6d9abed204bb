// Builds real Apache Kafka clients from their own jars so that they log their configuration, then
// closes them. No broker is needed: a client logs its `XConfig values:` block when constructed.
//
// Usage: java -cp <classes>:<kafka jars>:<logging jars> RealClients SPEC [SPEC ...]
// where each SPEC is one argument: TYPE;NAME;key=value;key=value...
// TYPE is producer, consumer, share_consumer (Kafka 4.1+), admin or streams. On stdout, one line per
// client: "BUILT <name>" or "REFUSED <name> <exception class>: <message>" (the client refused its
// configuration at construction, as a real application would see it). The log goes wherever the
// logging setup on the classpath sends it.

import java.time.Duration;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;

public class RealClients {
    private static final Duration CLOSE = Duration.ofSeconds(5);

    /** A metrics reporter that is not JmxReporter (metric.reporters=RealClients$QuietReporter; rule CC020). */
    public static class QuietReporter implements org.apache.kafka.common.metrics.MetricsReporter {
        @Override public void configure(java.util.Map<String, ?> configs) { }
        @Override public void init(java.util.List<org.apache.kafka.common.metrics.KafkaMetric> metrics) { }
        @Override public void metricChange(org.apache.kafka.common.metrics.KafkaMetric metric) { }
        @Override public void metricRemoval(org.apache.kafka.common.metrics.KafkaMetric metric) { }
        @Override public void close() { }
    }

    public static void main(String[] args) {
        for (String spec : args) {
            String[] parts = spec.split(";");
            String type = parts[0];
            String name = parts[1];
            Properties props = new Properties();
            for (int i = 2; i < parts.length; i++) {
                int eq = parts[i].indexOf('=');
                props.setProperty(parts[i].substring(0, eq), parts[i].substring(eq + 1));
            }
            try {
                build(type, props);
                System.out.println("BUILT " + name);
            } catch (Exception e) {
                Throwable cause = e;
                while (cause.getCause() != null && !(cause instanceof org.apache.kafka.common.config.ConfigException)) {
                    cause = cause.getCause();
                }
                System.out.println("REFUSED " + name + " " + cause.getClass().getName() + ": "
                        + String.valueOf(cause.getMessage()).replace('\n', ' '));
            }
            System.out.flush();
        }
    }

    private static void build(String type, Properties props) throws Exception {
        switch (type) {
            case "producer": {
                props.putIfAbsent("key.serializer", StringSerializer.class.getName());
                props.putIfAbsent("value.serializer", StringSerializer.class.getName());
                new KafkaProducer<String, String>(props).close(CLOSE);
                break;
            }
            case "consumer": {
                props.putIfAbsent("key.deserializer", StringDeserializer.class.getName());
                props.putIfAbsent("value.deserializer", StringDeserializer.class.getName());
                new KafkaConsumer<String, String>(props).close(CLOSE);
                break;
            }
            case "share_consumer": {
                // Only Kafka 4.1+ has a public share consumer; reflection keeps this file compiling on 3.9.
                props.putIfAbsent("key.deserializer", StringDeserializer.class.getName());
                props.putIfAbsent("value.deserializer", StringDeserializer.class.getName());
                Class<?> cls = Class.forName("org.apache.kafka.clients.consumer.KafkaShareConsumer");
                Object consumer = cls.getConstructor(Properties.class).newInstance(props);
                cls.getMethod("close", Duration.class).invoke(consumer, CLOSE);
                break;
            }
            case "admin": {
                Admin.create(props).close(CLOSE);
                break;
            }
            case "streams": {
                StreamsBuilder builder = new StreamsBuilder();
                builder.stream("orders-in").to("orders-out");
                new KafkaStreams(builder.build(), props).close(CLOSE);
                break;
            }
            default:
                throw new IllegalArgumentException("unknown client type " + type);
        }
    }
}
