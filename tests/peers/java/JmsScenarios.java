import java.util.ArrayList;
import java.util.Collections;
import java.util.Enumeration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import javax.jms.BytesMessage;
import javax.jms.Connection;
import javax.jms.DeliveryMode;
import javax.jms.Destination;
import javax.jms.MapMessage;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.MessageProducer;
import javax.jms.Queue;
import javax.jms.Session;
import javax.jms.StreamMessage;
import javax.jms.TemporaryQueue;
import javax.jms.TextMessage;
import javax.jms.Topic;
import javax.jms.TopicSubscriber;

import org.apache.activemq.ActiveMQConnectionFactory;

/**
 * Named JMS scenarios on the stock ActiveMQ Classic 5.17 client, each printing a normalized
 * transcript (message ids, temporary destination names and timestamps replaced by stable tokens),
 * so that the same scenario can be run against ActiveMQ Classic and against Hermod and the two
 * transcripts compared line for line (tests/peers/test_openwire_transcripts.py).
 *
 *   java -cp CLASSPATH JmsScenarios tcp://127.0.0.1:61616 SCENARIO [SCENARIO...]
 *   java -cp CLASSPATH JmsScenarios --list
 *
 * Every scenario uses destinations of its own ("scn.NAME..."), on a broker that has not seen them.
 * A line "none" means nothing arrived within 1 s where nothing is expected.
 */
public final class JmsScenarios {
    static final String[] ALL = {"ack-recover", "selector", "temp-reply", "durable", "transacted", "bodies",
                                 "close-unacked", "priority"};
    static final long WAIT_MS = 10000, NONE_MS = 1000;
    static String url;
    static final Map<String, String> TOKENS = new HashMap<>();
    static final List<Connection> OPEN = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        if (args.length == 1 && args[0].equals("--list")) {
            for (String s : ALL) System.out.println(s);
            return;
        }
        url = args[0];
        for (int i = 1; i < args.length; i++) {
            TOKENS.clear();
            System.out.println("== " + args[i]);
            try {
                run(args[i]);
            } catch (Exception e) {
                System.out.println("exception " + describe(e));
            } finally {
                closeAll();
            }
        }
        System.out.flush();
        System.exit(0);
    }

    static void run(String scenario) throws Exception {
        switch (scenario) {
            case "ack-recover": ackRecover(); break;
            case "selector": selector(); break;
            case "temp-reply": tempReply(); break;
            case "durable": durable(); break;
            case "transacted": transacted(); break;
            case "bodies": bodies(); break;
            case "close-unacked": closeUnacked(); break;
            case "priority": priority(); break;
            default: throw new IllegalArgumentException("unknown scenario " + scenario);
        }
    }

    // -- the scenarios -----------------------------------------------------------------------------

    /** 3 persistent text messages with typed properties; CLIENT_ACK: receive, recover, receive
     *  again (redelivered, count 2), acknowledge; nothing is left. */
    static void ackRecover() throws Exception {
        Session s = connect(null).createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue q = s.createQueue("scn.ack.recover");
        MessageProducer p = s.createProducer(q);
        for (int i = 1; i <= 3; i++) {
            TextMessage m = s.createTextMessage("m" + i);
            typedProperties(m, i);
            m.setJMSType("kind-" + i);
            m.setJMSCorrelationID("corr-" + i);
            p.send(m, DeliveryMode.PERSISTENT, 6, 0);
        }
        Session c = connect(null).createSession(false, Session.CLIENT_ACKNOWLEDGE);
        MessageConsumer consumer = c.createConsumer(q);
        Message last = null;
        for (int i = 0; i < 3; i++) last = show("recv", consumer.receive(WAIT_MS));
        System.out.println("recover");
        c.recover();
        for (int i = 0; i < 3; i++) last = show("again", consumer.receive(WAIT_MS));
        last.acknowledge();
        System.out.println("acknowledged");
        consumer.close();
        MessageConsumer after = c.createConsumer(q);
        show("after", after.receive(NONE_MS));
    }

    /** A selector on properties and headers; what it leaves behind, in order. */
    static void selector() throws Exception {
        Session s = connect(null).createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue q = s.createQueue("scn.selector");
        MessageProducer p = s.createProducer(q);
        String[] colors = {"red", "blue", "red", "green", "red"};
        for (int i = 0; i < colors.length; i++) {
            TextMessage m = s.createTextMessage("s" + i);
            m.setStringProperty("color", colors[i]);
            m.setDoubleProperty("weight", i * 1.5);
            p.send(m, DeliveryMode.PERSISTENT, i % 2 == 0 ? 7 : 2, 0);
        }
        MessageConsumer red = s.createConsumer(q, "color = 'red' AND weight > 2 AND JMSPriority > 4");
        drain("red", red);
        red.close();
        MessageConsumer in = s.createConsumer(q, "color IN ('green', 'blue') OR weight IS NULL");
        drain("in", in);
        in.close();
        drain("rest", s.createConsumer(q));
    }

    /** Request/reply through a temporary queue made by the requester, answered by another
     *  connection; then the temporary queue is deleted. */
    static void tempReply() throws Exception {
        Connection requester = connect(null);
        Session rs = requester.createSession(false, Session.AUTO_ACKNOWLEDGE);
        TemporaryQueue replies = rs.createTemporaryQueue();
        Queue service = rs.createQueue("scn.service");
        Session ss = connect(null).createSession(false, Session.AUTO_ACKNOWLEDGE);
        MessageConsumer server = ss.createConsumer(service);
        TextMessage request = rs.createTextMessage("ping");
        request.setJMSReplyTo(replies);
        request.setJMSCorrelationID("req-1");
        rs.createProducer(service).send(request);
        Message got = show("request", server.receive(WAIT_MS));
        TextMessage reply = ss.createTextMessage("pong");
        reply.setJMSCorrelationID(got.getJMSCorrelationID());
        ss.createProducer(got.getJMSReplyTo()).send(reply);
        MessageConsumer replyConsumer = rs.createConsumer(replies);
        show("reply", replyConsumer.receive(WAIT_MS));
        replyConsumer.close();
        replies.delete();
        System.out.println("temporary queue deleted");
    }

    /** A durable subscription: made, closed, messages published while away, resumed after a
     *  reconnect with the same client id, then unsubscribed: a new one sees nothing old. */
    static void durable() throws Exception {
        Connection c1 = connect("scn-client");
        Session s1 = c1.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Topic t = s1.createTopic("scn.durable");
        TopicSubscriber sub = s1.createDurableSubscriber(t, "sub1");
        System.out.println("subscribed sub1 noLocal=" + sub.getNoLocal());
        sub.close();
        c1.close();
        OPEN.remove(c1);
        Session ps = connect(null).createSession(false, Session.AUTO_ACKNOWLEDGE);
        MessageProducer p = ps.createProducer(ps.createTopic("scn.durable"));
        for (int i = 1; i <= 2; i++) p.send(ps.createTextMessage("d" + i), DeliveryMode.PERSISTENT, 4, 0);
        p.send(ps.createTextMessage("d-np"), DeliveryMode.NON_PERSISTENT, 4, 0);
        Connection c2 = connect("scn-client");
        Session s2 = c2.createSession(false, Session.AUTO_ACKNOWLEDGE);
        TopicSubscriber again = s2.createDurableSubscriber(t, "sub1");
        drain("resumed", again);
        again.close();
        s2.unsubscribe("sub1");
        System.out.println("unsubscribed");
        p.send(ps.createTextMessage("d3"), DeliveryMode.PERSISTENT, 4, 0);
        TopicSubscriber fresh = s2.createDurableSubscriber(t, "sub1");
        show("fresh", fresh.receive(NONE_MS));
        fresh.close();
        s2.unsubscribe("sub1");
    }

    /** Local transactions: a rolled-back send is never seen; a rolled-back receive comes again,
     *  redelivered. */
    static void transacted() throws Exception {
        Connection c = connect(null);
        Session tx = c.createSession(true, Session.SESSION_TRANSACTED);
        Queue q = tx.createQueue("scn.tx");
        MessageProducer p = tx.createProducer(q);
        p.send(tx.createTextMessage("t-rolled-back"));
        tx.rollback();
        System.out.println("send rolled back");
        p.send(tx.createTextMessage("t1"));
        p.send(tx.createTextMessage("t2"));
        tx.commit();
        System.out.println("sends committed");
        Session rx = connect(null).createSession(true, Session.SESSION_TRANSACTED);
        MessageConsumer consumer = rx.createConsumer(q);
        show("recv", consumer.receive(WAIT_MS));
        rx.rollback();
        System.out.println("receive rolled back");
        show("again", consumer.receive(WAIT_MS));
        show("again", consumer.receive(WAIT_MS));
        rx.commit();
        System.out.println("receives committed");
        show("after", consumer.receive(NONE_MS));
    }

    /** One message of each JMS body type, received as the same type with the same content. */
    static void bodies() throws Exception {
        Session s = connect(null).createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue q = s.createQueue("scn.bodies");
        MessageProducer p = s.createProducer(q);
        p.send(s.createTextMessage("text \u00e9\u4e2d"));
        BytesMessage b = s.createBytesMessage();
        b.writeBytes(new byte[] {0, 1, 2, (byte) 0xff});
        p.send(b);
        MapMessage m = s.createMapMessage();
        m.setString("s", "v");
        m.setInt("i", 7);
        m.setBoolean("b", true);
        m.setBytes("y", new byte[] {9});
        p.send(m);
        StreamMessage st = s.createStreamMessage();
        st.writeString("a");
        st.writeLong(5L);
        st.writeDouble(0.5);
        p.send(st);
        p.send(s.createMessage());
        p.send(s.createTextMessage(""));
        drain("recv", s.createConsumer(q));
    }

    /** CLIENT_ACK without acknowledging, then the connection closes cleanly: the messages come
     *  to the next consumer again. */
    static void closeUnacked() throws Exception {
        Session s = connect(null).createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue q = s.createQueue("scn.close.unacked");
        MessageProducer p = s.createProducer(q);
        for (int i = 1; i <= 2; i++) p.send(s.createTextMessage("u" + i));
        Connection c = connect(null);
        Session cs = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
        MessageConsumer consumer = cs.createConsumer(q);
        show("recv", consumer.receive(WAIT_MS));
        show("recv", consumer.receive(WAIT_MS));
        c.close();
        OPEN.remove(c);
        System.out.println("closed without ack");
        Session again = connect(null).createSession(false, Session.AUTO_ACKNOWLEDGE);
        drain("again", again.createConsumer(q));
    }

    /** Messages of mixed priorities queued before anyone consumes: the order they come in
     *  (Classic's queues are FIFO unless prioritizedMessages is configured). */
    static void priority() throws Exception {
        Session s = connect(null).createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue q = s.createQueue("scn.priority");
        MessageProducer p = s.createProducer(q);
        int[] priorities = {1, 9, 4, 7, 4};
        for (int i = 0; i < priorities.length; i++) {
            p.send(s.createTextMessage("p" + i), DeliveryMode.PERSISTENT, priorities[i], 0);
        }
        drain("recv", s.createConsumer(q));
    }

    // -- helpers ------------------------------------------------------------------------------------

    static Connection connect(String clientId) throws Exception {
        Connection c = new ActiveMQConnectionFactory(url).createConnection();
        if (clientId != null) c.setClientID(clientId);
        c.start();
        OPEN.add(c);
        return c;
    }

    static void closeAll() {
        for (Connection c : OPEN) {
            try { c.close(); } catch (Exception ignored) { }
        }
        OPEN.clear();
    }

    static void typedProperties(Message m, int i) throws Exception {
        m.setStringProperty("str", "v" + i);
        m.setIntProperty("int", i);
        m.setLongProperty("long", 1L << 40 | i);
        m.setDoubleProperty("double", i + 0.25);
        m.setFloatProperty("float", i + 0.5f);
        m.setBooleanProperty("bool", i % 2 == 1);
        m.setByteProperty("byte", (byte) i);
        m.setShortProperty("short", (short) (i * 100));
    }

    static void drain(String label, MessageConsumer consumer) throws Exception {
        Message m;
        int n = 0;
        while ((m = consumer.receive(n == 0 ? WAIT_MS : NONE_MS)) != null) {
            show(label, m);
            n++;
        }
        System.out.println(label + " done " + n);
    }

    static Message show(String label, Message m) throws Exception {
        if (m == null) {
            System.out.println(label + " none");
            return null;
        }
        StringBuilder sb = new StringBuilder(label);
        sb.append(" id=").append(token(m.getJMSMessageID()));
        sb.append(" body=").append(body(m));
        sb.append(" dest=").append(dest(m.getJMSDestination()));
        sb.append(" redelivered=").append(m.getJMSRedelivered());
        sb.append(" deliveryCount=").append(m.propertyExists("JMSXDeliveryCount")
                                            ? m.getIntProperty("JMSXDeliveryCount") : "-");
        sb.append(" mode=").append(m.getJMSDeliveryMode() == DeliveryMode.PERSISTENT ? "persistent" : "non-persistent");
        sb.append(" priority=").append(m.getJMSPriority());
        sb.append(" timestamp=").append(m.getJMSTimestamp() > 0 ? "set" : "0");
        sb.append(" expiration=").append(m.getJMSExpiration());
        if (m.getJMSCorrelationID() != null) sb.append(" correlation=").append(m.getJMSCorrelationID());
        if (m.getJMSType() != null) sb.append(" type=").append(m.getJMSType());
        if (m.getJMSReplyTo() != null) sb.append(" replyTo=").append(dest(m.getJMSReplyTo()));
        List<String> names = new ArrayList<>();
        for (Enumeration<?> e = m.getPropertyNames(); e.hasMoreElements();) names.add((String) e.nextElement());
        Collections.sort(names);
        sb.append(" props={");
        for (int i = 0; i < names.size(); i++) {
            Object v = m.getObjectProperty(names.get(i));
            sb.append(i == 0 ? "" : ", ").append(names.get(i)).append('=')
              .append(v == null ? "null" : v.getClass().getSimpleName() + ":" + v);
        }
        System.out.println(sb.append('}'));
        return m;
    }

    static String body(Message m) throws Exception {
        if (m instanceof TextMessage) return "Text:\"" + escape(((TextMessage) m).getText()) + "\"";
        if (m instanceof BytesMessage) {
            BytesMessage b = (BytesMessage) m;
            byte[] data = new byte[(int) b.getBodyLength()];
            b.readBytes(data);
            StringBuilder hex = new StringBuilder();
            for (byte x : data) hex.append(String.format("%02x", x));
            return "Bytes:" + hex;
        }
        if (m instanceof MapMessage) {
            MapMessage mm = (MapMessage) m;
            List<String> keys = new ArrayList<>();
            for (Enumeration<?> e = mm.getMapNames(); e.hasMoreElements();) keys.add((String) e.nextElement());
            Collections.sort(keys);
            StringBuilder sb = new StringBuilder("Map:{");
            for (int i = 0; i < keys.size(); i++) {
                Object v = mm.getObject(keys.get(i));
                String shown = v instanceof byte[] ? "byte[" + ((byte[]) v).length + "]" : String.valueOf(v);
                sb.append(i == 0 ? "" : ", ").append(keys.get(i)).append('=').append(v.getClass().getSimpleName())
                  .append(':').append(shown);
            }
            return sb.append('}').toString();
        }
        if (m instanceof StreamMessage) {
            StreamMessage sm = (StreamMessage) m;
            StringBuilder sb = new StringBuilder("Stream:[");
            try {
                for (int i = 0; ; i++) {
                    Object v = sm.readObject();
                    sb.append(i == 0 ? "" : ", ").append(v.getClass().getSimpleName()).append(':').append(v);
                }
            } catch (javax.jms.MessageEOFException end) {
                return sb.append(']').toString();
            }
        }
        return "Message";
    }

    static String escape(String s) {
        return s == null ? "null" : s.replace("\\", "\\\\").replace("\n", "\\n").replace("\"", "\\\"");
    }

    /** queue://NAME, topic://NAME; temporary destinations (their names carry the connection id)
     *  become temp-queue://TOKEN. */
    static String dest(Destination d) throws Exception {
        if (d == null) return "null";
        if (d instanceof TemporaryQueue) return "temp-queue://" + token(((Queue) d).getQueueName());
        if (d instanceof javax.jms.TemporaryTopic) return "temp-topic://" + token(((Topic) d).getTopicName());
        if (d instanceof Queue) return "queue://" + ((Queue) d).getQueueName();
        if (d instanceof Topic) return "topic://" + ((Topic) d).getTopicName();
        return d.toString();
    }

    /** A broker- or client-made name (message id, temporary destination) as "#n" in order of
     *  first appearance in the scenario. */
    static String token(String value) {
        if (value == null) return "null";
        return TOKENS.computeIfAbsent(value, v -> "#" + (TOKENS.size() + 1));
    }

    static String describe(Throwable t) {
        return t.getClass().getName() + (t.getMessage() == null ? "" : ": " + t.getMessage().replace('\n', ' '));
    }
}
