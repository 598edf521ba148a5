// A STOMP load generator built on ActiveMQ Classic's own client class (StompConnection, from
// activemq-stomp in Debian's libactivemq-java): the same client against every broker.
//   java -cp CLASSPATH:. StompLoad q1|t4 HOST PORT COUNT SIZE
// q1: one producer SENDs COUNT messages to /queue/bench.q1.<run> with a receipt on each (at most
//     WINDOW unanswered), one consumer takes them with client-individual ACKs.
// t4: one producer SENDs COUNT messages to /topic/bench.t4.<run>; four consumers (auto ack) each
//     take all of them.
// Prints one line: "scenario messages seconds msgs/s" (deliveries per second for t4).
import java.util.HashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.activemq.transport.stomp.StompConnection;
import org.apache.activemq.transport.stomp.StompFrame;

public class StompLoad {
    static final int WINDOW = 100;

    // StompConnection reads its socket a byte at a time (a system call per byte); this socket hands
    // it a buffered stream, the same for every broker, so the brokers are measured, not the reads.
    static class BufferedSocket extends java.net.Socket {
        private java.io.InputStream in;

        BufferedSocket(String host, int port) throws java.io.IOException {
            super(host, port);
            setTcpNoDelay(true);
        }

        @Override
        public synchronized java.io.InputStream getInputStream() throws java.io.IOException {
            if (in == null) in = new java.io.BufferedInputStream(super.getInputStream(), 65536);
            return in;
        }
    }

    static StompConnection open(String host, int port) throws Exception {
        StompConnection c = new StompConnection();
        c.open(new BufferedSocket(host, port));
        HashMap<String, String> h = new HashMap<>();
        h.put("accept-version", "1.2");
        h.put("host", "/");  // RabbitMQ reads it as the virtual host
        c.connect(h);  // reads CONNECTED itself (and throws on anything else)
        return c;
    }

    static void subscribe(StompConnection c, String destination, String ack) throws Exception {
        HashMap<String, String> h = new HashMap<>();
        h.put("id", "s");
        h.put("receipt", "subscribed");
        h.put("activemq.prefetchSize", "1000");  // ActiveMQ and Hermod
        h.put("prefetch-count", "1000");  // RabbitMQ
        c.subscribe(destination, ack, h);
        StompFrame f = c.receive(30000);
        if (!"RECEIPT".equals(f.getAction())) throw new IllegalStateException(f.toString());
    }

    static Thread consumer(StompConnection c, int count, boolean ack, AtomicReference<Throwable> failed) {
        Thread t = new Thread(() -> {
            try {
                for (int i = 0; i < count; i++) {
                    StompFrame m = c.receive(60000);
                    if (!"MESSAGE".equals(m.getAction())) throw new IllegalStateException(m.toString());
                    if (ack) {
                        HashMap<String, String> h = new HashMap<>();
                        h.put("id", m.getHeaders().get("ack"));
                        c.sendFrame(frame("ACK", h, ""));
                    }
                }
            } catch (Throwable e) {
                failed.compareAndSet(null, e);
            }
        });
        t.start();
        return t;
    }

    static String frame(String command, HashMap<String, String> headers, String body) {
        StringBuilder b = new StringBuilder(command).append('\n');
        headers.forEach((k, v) -> b.append(k).append(':').append(v).append('\n'));
        return b.append('\n').append(body).append('\u0000').toString();
    }

    public static void main(String[] args) throws Exception {
        String scenario = args[0], host = args[1];
        int port = Integer.parseInt(args[2]), count = Integer.parseInt(args[3]), size = Integer.parseInt(args[4]);
        String run = Long.toString(System.nanoTime());
        String body = "x".repeat(size);
        AtomicReference<Throwable> failed = new AtomicReference<>();
        boolean q1 = scenario.equals("q1");
        String destination = q1 ? "/queue/bench.q1." + run : "/topic/bench.t4." + run;
        int consumers = q1 ? 1 : 4;
        Thread[] threads = new Thread[consumers];
        StompConnection[] conns = new StompConnection[consumers];
        for (int i = 0; i < consumers; i++) {
            conns[i] = open(host, port);
            subscribe(conns[i], destination, q1 ? "client-individual" : "auto");
        }
        StompConnection producer = open(host, port);
        long start = System.nanoTime();
        for (int i = 0; i < consumers; i++) threads[i] = consumer(conns[i], count, q1, failed);
        Semaphore window = new Semaphore(WINDOW);
        Thread receipts = new Thread(() -> {
            try {
                for (int i = 0; i < count; i++) {
                    StompFrame r = producer.receive(60000);
                    if (!"RECEIPT".equals(r.getAction())) throw new IllegalStateException(r.toString());
                    window.release();
                }
            } catch (Throwable e) {
                failed.compareAndSet(null, e);
                window.release(WINDOW);
            }
        });
        if (q1) receipts.start();
        for (int i = 0; i < count && failed.get() == null; i++) {
            HashMap<String, String> h = new HashMap<>();
            h.put("destination", destination);
            if (q1) {
                window.acquire();
                h.put("receipt", "r" + i);
            }
            producer.sendFrame(frame("SEND", h, body));
        }
        if (q1) receipts.join();
        for (Thread t : threads) t.join();
        double seconds = (System.nanoTime() - start) / 1e9;
        if (failed.get() != null) throw new RuntimeException(failed.get());
        long delivered = (long) count * consumers;
        System.out.printf("%s %d %.3f %.0f%n", scenario, delivered, seconds, delivered / seconds);
        producer.disconnect();
        for (StompConnection c : conns) c.disconnect();
    }
}
