// A real Apache Kafka Java producer of any release from 0.10 to 4.x (only API every one of them has):
// it sends COUNT records to TOPIC, prints "SENT <count>", then goes on sending one record a second
// until its standard input closes (or it is stopped), so the broker counts its connection by client software (KIP-511)
// and, for a client older than 2.1, its requests on protocol versions Kafka 4.0 removed (KIP-896).
//
// Usage (single-file source program, compiled by the java launcher against the jars on the classpath):
//   java -cp "<kafka-clients jars>" tests/clients/InventoryClient.java BOOTSTRAP TOPIC COUNT

import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;

public class InventoryClient {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.setProperty("bootstrap.servers", args[0]);
        props.setProperty("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        props.setProperty("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        props.setProperty("client.id", "inventory-" + args[3 < args.length ? 3 : 1]);
        props.setProperty("metadata.max.age.ms", "2000");
        props.setProperty("acks", "1");
        int count = Integer.parseInt(args[2]);
        KafkaProducer<String, String> producer = new KafkaProducer<>(props);
        for (int i = 0; i < count; i++) {
            producer.send(new ProducerRecord<String, String>(args[1], "k" + i, "v" + i)).get();
        }
        producer.flush();
        System.out.println("SENT " + count);
        System.out.flush();
        final boolean[] done = {false};
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() != -1) {
                    // ignore input
                }
            } catch (java.io.IOException ignored) {
                // stdin gone: stop
            }
            done[0] = true;
        });
        stdin.setDaemon(true);
        stdin.start();
        for (int i = count; !done[0]; i++) {
            producer.send(new ProducerRecord<String, String>(args[1], "k" + i, "v" + i));
            Thread.sleep(1000);
        }
        producer.close();
    }
}
