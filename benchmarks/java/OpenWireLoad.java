import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import javax.jms.BytesMessage;
import javax.jms.Connection;
import javax.jms.DeliveryMode;
import javax.jms.Destination;
import javax.jms.MessageConsumer;
import javax.jms.MessageProducer;
import javax.jms.Session;

import org.apache.activemq.ActiveMQConnectionFactory;

/**
 * A JMS load generator on the stock ActiveMQ Classic 5.17 client, with the client's defaults
 * (persistent sends synchronous, non-persistent asynchronous, prefetch 1000): nothing here is
 * tuned for either broker. One connection per producer and per consumer, 1 KiB BytesMessages.
 *
 * Scenarios: q1 (1 producer -> 1 consumer on a queue, non-persistent), q1d (the same, persistent),
 * t4 (1 producer -> 4 topic subscribers, non-persistent), psync (--producers N producers sending
 * persistent messages synchronously to one queue, 1 consumer draining it).
 *
 * Prints one line: "result protocol=openwire scenario=q1 msgs=N deliveries=M secs=S msg_per_s=R
 * deliveries_per_s=D" (time from the first send to the last delivery), or the same with
 * error="..." (a connect failure starts with "connect:"). Exit status 0 only on success.
 *
 *   java -cp CLASSPATH OpenWireLoad --url tcp://127.0.0.1:61616 --scenario q1 --count 20000
 *        [--size 1024] [--producers 8] [--user U --password P] [--dest NAME] [--timeout 300]
 */
public final class OpenWireLoad {
    static String url = "tcp://127.0.0.1:61616", scenario = "q1", user = null, password = null, dest = null;
    static int count = 20000, size = 1024, producers = 8;
    static long timeoutS = 300;
    static final List<Connection> CONNECTIONS = new ArrayList<>();

    public static void main(String[] args) {
        for (int i = 0; i + 1 < args.length; i += 2) {
            String v = args[i + 1];
            switch (args[i]) {
                case "--url": url = v; break;
                case "--scenario": scenario = v; break;
                case "--count": count = Integer.parseInt(v); break;
                case "--size": size = Integer.parseInt(v); break;
                case "--producers": producers = Integer.parseInt(v); break;
                case "--user": user = v; break;
                case "--password": password = v; break;
                case "--dest": dest = v; break;
                case "--timeout": timeoutS = Long.parseLong(v); break;
                default: fail("usage: unknown option " + args[i], 0, 0);
            }
        }
        if (dest == null) dest = "bench." + scenario;
        // A watchdog: a broker that never answers must not hang the benchmark.
        Thread watchdog = new Thread(() -> {
            try { Thread.sleep((timeoutS + 30) * 1000); } catch (InterruptedException e) { return; }
            fail("timeout: no result in " + (timeoutS + 30) + " s", 0, 0);
        });
        watchdog.setDaemon(true);
        watchdog.start();
        ActiveMQConnectionFactory factory = new ActiveMQConnectionFactory(url);
        try {
            switch (scenario) {
                case "q1": run(factory, false, 1, 1, false); break;
                case "q1d": run(factory, true, 1, 1, false); break;
                case "t4": run(factory, false, 1, 4, true); break;
                case "psync": run(factory, true, producers, 1, false); break;
                default: fail("usage: unknown scenario " + scenario, 0, 0);
            }
        } catch (Throwable t) {
            fail(describe(t), 0, 0);
        }
        closeAll();
        System.exit(0);
    }

    static Connection open(ActiveMQConnectionFactory factory) throws Exception {
        Connection c;
        try {
            c = user == null ? factory.createConnection() : factory.createConnection(user, password);
            c.start();
        } catch (Exception e) {
            throw new Exception("connect: " + describe(e), e);
        }
        synchronized (CONNECTIONS) { CONNECTIONS.add(c); }
        return c;
    }

    static void run(ActiveMQConnectionFactory factory, boolean persistent, int nProducers, int nConsumers,
                    boolean topic) throws Exception {
        final AtomicLong delivered = new AtomicLong();
        final long expected = (long) count * nConsumers;
        final CountDownLatch done = new CountDownLatch(1);
        final AtomicReference<Throwable> error = new AtomicReference<>();
        for (int i = 0; i < nConsumers; i++) {
            Connection c = open(factory);
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Destination d = topic ? s.createTopic(dest) : s.createQueue(dest);
            MessageConsumer consumer = s.createConsumer(d);
            consumer.setMessageListener(m -> {
                if (delivered.incrementAndGet() == expected) done.countDown();
            });
            c.setExceptionListener(e -> { error.compareAndSet(null, e); done.countDown(); });
        }
        byte[] body = new byte[size];
        for (int i = 0; i < size; i++) body[i] = (byte) ('a' + i % 26);
        int per = count / nProducers, extra = count % nProducers;
        List<Thread> threads = new ArrayList<>();
        List<Session> sessions = new ArrayList<>();
        List<MessageProducer> senders = new ArrayList<>();
        for (int p = 0; p < nProducers; p++) {
            Connection c = open(factory);
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer producer = s.createProducer(topic ? s.createTopic(dest) : s.createQueue(dest));
            producer.setDeliveryMode(persistent ? DeliveryMode.PERSISTENT : DeliveryMode.NON_PERSISTENT);
            sessions.add(s);
            senders.add(producer);
        }
        long start = System.nanoTime();
        for (int p = 0; p < nProducers; p++) {
            final Session s = sessions.get(p);
            final MessageProducer producer = senders.get(p);
            final int n = per + (p < extra ? 1 : 0);
            Thread t = new Thread(() -> {
                try {
                    for (int i = 0; i < n; i++) {
                        BytesMessage m = s.createBytesMessage();
                        m.writeBytes(body);
                        producer.send(m);
                    }
                } catch (Throwable e) {
                    error.compareAndSet(null, e);
                    done.countDown();
                }
            });
            threads.add(t);
            t.start();
        }
        boolean complete = done.await(timeoutS, TimeUnit.SECONDS);
        double secs = (System.nanoTime() - start) / 1e9;
        for (Thread t : threads) t.join(1000);
        long got = delivered.get();
        if (error.get() != null && got < expected) fail(describe(error.get()), got / Math.max(1, nConsumers), secs);
        if (!complete) fail("timeout: " + got + " of " + expected + " deliveries in " + timeoutS + " s",
                            got / nConsumers, secs);
        System.out.printf("result protocol=openwire scenario=%s msgs=%d deliveries=%d secs=%.3f msg_per_s=%.1f "
                          + "deliveries_per_s=%.1f%n", scenario, count, got, secs, count / secs, got / secs);
        System.out.flush();
    }

    static String describe(Throwable t) {
        String msg = t.getClass().getSimpleName() + (t.getMessage() == null ? "" : ": " + t.getMessage());
        if (t.getMessage() != null && t.getMessage().startsWith("connect: ")) msg = t.getMessage();
        return msg.replace('"', '\'').replace('\n', ' ');
    }

    static void closeAll() {
        synchronized (CONNECTIONS) {
            for (Connection c : CONNECTIONS) {
                try { c.close(); } catch (Throwable ignored) { }
            }
        }
    }

    static void fail(String why, long msgs, double secs) {
        System.out.printf("result protocol=openwire scenario=%s msgs=%d secs=%.3f error=\"%s\"%n", scenario, msgs, secs,
                          why);
        System.out.flush();
        Runtime.getRuntime().halt(1);
    }
}
