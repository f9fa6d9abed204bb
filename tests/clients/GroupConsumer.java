// A real Apache Kafka consumer in a group, for the consumer-group tests: it subscribes, reads until it has
// COUNT records, commits them synchronously and prints "CONSUMED <n>"; then either closes (MODE "close": the
// group is left Empty, with its committed offsets) or stays in the group (MODE is the path of a stop file: it
// keeps polling, reading and committing nothing more, until that file exists, then closes).
//
// Usage: java -cp <classes>:<kafka-clients jars> GroupConsumer BOOTSTRAP GROUP TOPIC COUNT MODE [key=value ...]
// (extra client configs, e.g. group.protocol=consumer or client.id=...).

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.Collections;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class GroupConsumer {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.setProperty("bootstrap.servers", args[0]);
        props.setProperty("group.id", args[1]);
        props.setProperty("auto.offset.reset", "earliest");
        props.setProperty("enable.auto.commit", "false");
        props.setProperty("key.deserializer", ByteArrayDeserializer.class.getName());
        props.setProperty("value.deserializer", ByteArrayDeserializer.class.getName());
        for (int i = 5; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            props.setProperty(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        int wanted = Integer.parseInt(args[3]);
        Path stop = "close".equals(args[4]) ? null : Paths.get(args[4]);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(Collections.singletonList(args[2]));
            int got = 0;
            long until = System.currentTimeMillis() + 90_000;
            while (got < wanted && System.currentTimeMillis() < until) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                got += records.count();
            }
            consumer.commitSync(Duration.ofSeconds(30));
            System.out.println("CONSUMED " + got);
            System.out.flush();
            if (stop != null) {
                consumer.pause(consumer.assignment());
                long deadline = System.currentTimeMillis() + 600_000;
                while (!Files.exists(stop) && System.currentTimeMillis() < deadline) {
                    consumer.pause(consumer.assignment());  // partitions assigned later stay unread too
                    consumer.poll(Duration.ofMillis(200));
                }
            }
        }
        System.out.println("CLOSED");
    }
}
