// Prints the configuration keys and ConfigDef types that Apache Kafka's Java clients define:
// ProducerConfig, ConsumerConfig, ShareConsumerConfig (4.x), AdminClientConfig and StreamsConfig,
// read by reflection from their static ConfigDef, for several releases in one JVM (one class
// loader per release, so no release's classes are compiled in).
//
// Run by backend/configs/known_keys_build.py as a single-file source program:
//   java KnownKeysDump.java RELEASE=JAR[:JAR...] [RELEASE=JAR[:JAR...] ...]
// with each release's kafka-clients and kafka-streams jars (and slf4j-api). Prints one JSON
// object per release and line:
//   {"release": "4.3.1", "producer": {"acks": "STRING", ...}, ..., "share_unsupported": [...],
//    "defaults": {"producer": {"acks": "all", "transactional.id": null, ...}, ...}}
// A client class the release does not have is left out. "defaults" holds each key's ConfigKey.defaultValue as
// ConfigDef.convertToString renders it (null: the default is null; a key with no default, such as
// bootstrap.servers in older releases, is left out; a PASSWORD default is never printed, only "[hidden]").
// A default built from java.io.tmpdir (Streams' state.dir) is written with "${java.io.tmpdir}" in its place,
// so the output does not depend on the machine it runs on.

import java.io.File;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.net.URL;
import java.net.URLClassLoader;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

public class KnownKeysDump {
    private static final String[][] CLIENTS = {
        {"producer", "org.apache.kafka.clients.producer.ProducerConfig"},
        {"consumer", "org.apache.kafka.clients.consumer.ConsumerConfig"},
        {"share_consumer", "org.apache.kafka.clients.consumer.ShareConsumerConfig"},
        {"admin", "org.apache.kafka.clients.admin.AdminClientConfig"},
        {"streams", "org.apache.kafka.streams.StreamsConfig"},
    };

    public static void main(String[] args) throws Exception {
        for (String arg : args) {
            int eq = arg.indexOf('=');
            String release = arg.substring(0, eq);
            List<URL> urls = new ArrayList<>();
            for (String jar : arg.substring(eq + 1).split(File.pathSeparator)) {
                urls.add(new File(jar).toURI().toURL());
            }
            try (URLClassLoader loader = new URLClassLoader(urls.toArray(new URL[0]), ClassLoader.getPlatformClassLoader())) {
                // ConfigDef resolves class-name defaults through the context class loader.
                Thread.currentThread().setContextClassLoader(loader);
                System.out.println(dump(release, loader));
            }
        }
    }

    private static String dump(String release, ClassLoader loader) throws Exception {
        StringBuilder out = new StringBuilder("{\"release\":").append(quote(release));
        StringBuilder defaults = new StringBuilder(",\"defaults\":{");
        boolean firstClient = true;
        Class<?> configDef = Class.forName("org.apache.kafka.common.config.ConfigDef", true, loader);
        Class<?> typeEnum = Class.forName("org.apache.kafka.common.config.ConfigDef$Type", true, loader);
        Object noDefault = configDef.getField("NO_DEFAULT_VALUE").get(null);
        java.lang.reflect.Method convert = configDef.getMethod("convertToString", Object.class, typeEnum);
        String tmpdir = System.getProperty("java.io.tmpdir");
        for (String[] client : CLIENTS) {
            Class<?> cls;
            try {
                cls = Class.forName(client[1], true, loader);
            } catch (ClassNotFoundException absent) {
                continue;
            }
            Object def = staticField(cls, configDef);
            Map<?, ?> configKeys = (Map<?, ?>) configDef.getMethod("configKeys").invoke(def);
            Map<String, String> keys = new TreeMap<>();
            Map<String, String> keyDefaults = new TreeMap<>();
            for (Map.Entry<?, ?> entry : configKeys.entrySet()) {
                Object configKey = entry.getValue();
                Object type = configKey.getClass().getField("type").get(configKey);
                keys.put(String.valueOf(entry.getKey()), String.valueOf(type));
                Object value = configKey.getClass().getField("defaultValue").get(configKey);
                if (value == noDefault) {
                    continue;
                }
                String text;
                if (value == null) {
                    text = null;
                } else if (String.valueOf(type).equals("PASSWORD")) {
                    text = "[hidden]";
                } else {
                    text = (String) convert.invoke(null, value, type);
                    if (text != null && tmpdir != null && !tmpdir.isEmpty()) {
                        text = text.replace(tmpdir, "${java.io.tmpdir}");
                    }
                }
                keyDefaults.put(String.valueOf(entry.getKey()), text);
            }
            defaults.append(firstClient ? "" : ",").append('"').append(client[0]).append("\":{");
            firstClient = false;
            boolean firstDefault = true;
            for (Map.Entry<String, String> entry : keyDefaults.entrySet()) {
                defaults.append(firstDefault ? "" : ",").append(quote(entry.getKey())).append(':')
                        .append(entry.getValue() == null ? "null" : quote(entry.getValue()));
                firstDefault = false;
            }
            defaults.append('}');
            out.append(",\"").append(client[0]).append("\":{");
            boolean firstKey = true;
            for (Map.Entry<String, String> entry : keys.entrySet()) {
                out.append(firstKey ? "" : ",").append(quote(entry.getKey())).append(':').append(quote(entry.getValue()));
                firstKey = false;
            }
            out.append('}');
            if (client[0].equals("share_consumer")) {
                out.append(",\"share_unsupported\":[");
                List<String> unsupported = unsupported(cls);
                for (int i = 0; i < unsupported.size(); i++) {
                    out.append(i == 0 ? "" : ",").append(quote(unsupported.get(i)));
                }
                out.append(']');
            }
        }
        return out.append(defaults).append("}}").toString();
    }

    /** The static ConfigDef the class (or a class it extends) defines its keys in. */
    private static Object staticField(Class<?> cls, Class<?> type) throws IllegalAccessException {
        for (Class<?> c = cls; c != null; c = c.getSuperclass()) {
            for (Field field : c.getDeclaredFields()) {
                if (Modifier.isStatic(field.getModifiers()) && field.getType() == type) {
                    field.setAccessible(true);
                    return field.get(null);
                }
            }
        }
        throw new IllegalStateException("no static " + type.getSimpleName() + " in " + cls.getName());
    }

    /** The consumer keys a share consumer refuses (ShareConsumerConfig's static list of them). */
    private static List<String> unsupported(Class<?> cls) throws IllegalAccessException {
        List<String> out = new ArrayList<>();
        for (Field field : cls.getDeclaredFields()) {
            if (Modifier.isStatic(field.getModifiers()) && List.class.isAssignableFrom(field.getType())) {
                field.setAccessible(true);
                for (Object key : (List<?>) field.get(null)) {
                    out.add(String.valueOf(key));
                }
            }
        }
        out.sort(null);
        return out;
    }

    private static String quote(String text) {
        StringBuilder b = new StringBuilder("\"");
        for (char ch : text.toCharArray()) {
            if (ch == '"' || ch == '\\') {
                b.append('\\').append(ch);
            } else if (ch < 0x20) {
                b.append(String.format("\\u%04x", (int) ch));
            } else {
                b.append(ch);
            }
        }
        return b.append('"').toString();
    }
}
