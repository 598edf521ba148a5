import java.io.BufferedInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.activemq.transport.stomp.StompConnection;
import org.apache.activemq.transport.stomp.StompFrame;

/**
 * A STOMP load generator that is not ours: ActiveMQ Classic's own blocking STOMP 1.0 client class,
 * org.apache.activemq.transport.stomp.StompConnection (activemq-stomp 5.17), used as it comes.
 * One connection per producer and per subscriber, text bodies of --size ASCII bytes.
 *
 * Scenarios: q1 (1 producer -> 1 consumer on /queue/NAME; every SEND persistent:true with a
 * receipt, at most --window receipts outstanding; the consumer subscribes ack:client and ACKs
 * every MESSAGE), t4 (1 producer -> 4 subscribers of /topic/NAME, ack:auto, no receipts except
 * the last send's).
 *
 * The class reads its socket one byte per read() call, so a frame of 1 KiB costs a thousand system
 * calls and the client, not the broker, sets the pace. By default it is handed (through its own
 * public open(Socket)) a socket whose input stream is buffered: the frames, their order and every
 * header stay exactly the class's; --unbuffered gives it a plain socket, as shipped.
 *
 * Prints one line: "result protocol=stomp scenario=q1 msgs=N deliveries=M secs=S msg_per_s=R
 * deliveries_per_s=D" or the same with error="..." (a connect failure starts with "connect:").
 *
 *   java -cp CLASSPATH StompLoad --host 127.0.0.1 --port 61613 --scenario q1 --count 20000
 *        [--size 1024] [--window 100] [--user U --password P] [--dest NAME] [--timeout 300] [--unbuffered]
 */
public final class StompLoad {
    static String host = "127.0.0.1", scenario = "q1", user = "", password = "", dest = null;
    static int port = 61613, count = 20000, size = 1024, window = 100;
    static long timeoutS = 300;
    static boolean buffered = true;
    static final List<StompConnection> CONNECTIONS = new ArrayList<>();

    public static void main(String[] args) {
        List<String> rest = new ArrayList<>();
        for (String a : args) {
            if (a.equals("--unbuffered")) buffered = false; else rest.add(a);
        }
        args = rest.toArray(new String[0]);
        for (int i = 0; i + 1 < args.length; i += 2) {
            String v = args[i + 1];
            switch (args[i]) {
                case "--host": host = v; break;
                case "--port": port = Integer.parseInt(v); break;
                case "--scenario": scenario = v; break;
                case "--count": count = Integer.parseInt(v); break;
                case "--size": size = Integer.parseInt(v); break;
                case "--window": window = Integer.parseInt(v); break;
                case "--user": user = v; break;
                case "--password": password = v; break;
                case "--dest": dest = v; break;
                case "--timeout": timeoutS = Long.parseLong(v); break;
                default: fail("usage: unknown option " + args[i], 0, 0);
            }
        }
        if (dest == null) dest = "bench.stomp." + scenario;
        Thread watchdog = new Thread(() -> {
            try { Thread.sleep((timeoutS + 30) * 1000); } catch (InterruptedException e) { return; }
            fail("timeout: no result in " + (timeoutS + 30) + " s", 0, 0);
        });
        watchdog.setDaemon(true);
        watchdog.start();
        try {
            switch (scenario) {
                case "q1": run("/queue/" + dest, 1, true); break;
                case "t4": run("/topic/" + dest, 4, false); break;
                default: fail("usage: unknown scenario " + scenario, 0, 0);
            }
        } catch (Throwable t) {
            fail(describe(t), 0, 0);
        }
        for (StompConnection c : CONNECTIONS) {
            try { c.disconnect(); c.close(); } catch (Throwable ignored) { }
        }
        System.exit(0);
    }

    static StompConnection open() throws Exception {
        StompConnection c = new StompConnection();
        try {
            if (buffered) c.open(new BufferedSocket(host, port)); else c.open(host, port);
            c.getStompSocket().setSoTimeout((int) Math.min(Integer.MAX_VALUE, timeoutS * 1000));
            c.connect(user, password);
        } catch (Exception e) {
            throw new Exception("connect: " + describe(e), e);
        }
        CONNECTIONS.add(c);
        return c;
    }

    static void run(String destination, int nConsumers, boolean queue) throws Exception {
        final AtomicLong delivered = new AtomicLong();
        final AtomicReference<Throwable> error = new AtomicReference<>();
        List<Thread> consumers = new ArrayList<>();
        for (int i = 0; i < nConsumers; i++) {
            StompConnection c = open();
            HashMap<String, String> headers = new HashMap<>();
            headers.put("receipt", "sub-" + i);
            headers.put("id", "sub-" + i);
            c.subscribe(destination, queue ? "client" : "auto", headers);
            StompFrame receipt = c.receive();
            if (!"RECEIPT".equals(receipt.getAction())) throw new Exception("subscribe: " + frameText(receipt));
            Thread t = new Thread(() -> {
                try {
                    for (int n = 0; n < count; n++) {
                        StompFrame f = c.receive(timeoutS * 1000);
                        if (!"MESSAGE".equals(f.getAction())) throw new Exception("consume: " + frameText(f));
                        if (queue) c.ack(f);
                        delivered.incrementAndGet();
                    }
                } catch (Throwable e) {
                    error.compareAndSet(null, e);
                }
            });
            consumers.add(t);
        }
        StringBuilder sb = new StringBuilder(size);
        for (int i = 0; i < size; i++) sb.append((char) ('a' + i % 26));
        String body = sb.toString();
        StompConnection producer = open();
        long start = System.nanoTime();
        for (Thread t : consumers) t.start();
        long outstanding = 0;
        for (int i = 0; i < count && error.get() == null; i++) {
            HashMap<String, String> headers = new HashMap<>();
            boolean receipt = queue || i == count - 1;
            if (queue) headers.put("persistent", "true");
            if (receipt) headers.put("receipt", "m" + i);
            producer.send(destination, body, null, headers);
            if (receipt) outstanding++;
            while (outstanding > (i == count - 1 ? 0 : window - 1)) {
                StompFrame f = producer.receive(timeoutS * 1000);
                if (!"RECEIPT".equals(f.getAction())) throw new Exception("send: " + frameText(f));
                outstanding--;
            }
        }
        for (Thread t : consumers) t.join(timeoutS * 1000);
        double secs = (System.nanoTime() - start) / 1e9;
        long got = delivered.get();
        if (error.get() != null) fail(describe(error.get()), got / nConsumers, secs);
        if (got < (long) count * nConsumers) fail("timeout: " + got + " deliveries", got / nConsumers, secs);
        System.out.printf("result protocol=stomp scenario=%s msgs=%d deliveries=%d secs=%.3f msg_per_s=%.1f "
                          + "deliveries_per_s=%.1f socket=%s%n", scenario, count, got, secs, count / secs, got / secs,
                          buffered ? "buffered" : "unbuffered");
        System.out.flush();
    }

    /** A socket whose input stream reads ahead, so that StompConnection's read() of one byte is
     *  served from memory. */
    static final class BufferedSocket extends Socket {
        private InputStream in;

        BufferedSocket(String host, int port) throws IOException {
            super(host, port);
        }

        @Override
        public synchronized InputStream getInputStream() throws IOException {
            if (in == null) in = new BufferedInputStream(super.getInputStream(), 65536);
            return in;
        }
    }

    static String frameText(StompFrame f) {
        String m = f.getHeaders().get("message");
        return f.getAction() + (m == null ? "" : " " + m);
    }

    static String describe(Throwable t) {
        if (t instanceof SocketTimeoutException) return "timeout: " + t.getMessage();
        String msg = t.getClass().getSimpleName() + (t.getMessage() == null ? "" : ": " + t.getMessage());
        if (t.getMessage() != null && t.getMessage().startsWith("connect: ")) msg = t.getMessage();
        return msg.replace('"', '\'').replace('\n', ' ');
    }

    static void fail(String why, long msgs, double secs) {
        System.out.printf("result protocol=stomp scenario=%s msgs=%d secs=%.3f error=\"%s\"%n", scenario, msgs, secs, why);
        System.out.flush();
        Runtime.getRuntime().halt(1);
    }
}
