import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.URLDecoder;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import javax.jms.*;

import org.apache.activemq.ActiveMQConnectionFactory;
import org.apache.activemq.command.ActiveMQDestination;

/**
 * A scripted ActiveMQ Classic JMS client for the tests: one command a line on stdin, one answer a
 * line on stdout ("OK ..." or "ERR <exception class> <message>"). Values are URL-encoded.
 *
 *   connect URL USER PASS CLIENTID        ("-" for none)
 *   session S TRANSACTED ACKMODE          (auto | client | individual | dups)
 *   producer P S DEST [persistent|nonpersistent]   DEST: queue:NAME topic:NAME temp:T (a temp made here)
 *   send P KIND BODY [HEADER=VALUE ...] [prop.NAME=TYPE:VALUE ...]
 *        KIND text | bytes (hex) | map (k=TYPE:V;...) | stream (TYPE:V;...) | object | message
 *        HEADER: corr type prio ttl group groupseq replyto (DEST) deliverymode
 *   consumer C S DEST [selector=..] [durable=NAME] [nolocal]
 *   receive C TIMEOUT_MS      -> OK MSG k=v ... | OK NONE
 *   ack C                     (acknowledge the last message C received)
 *   reply C S BODY            (a text message to the JMSReplyTo of the last message C received)
 *   browse S QUEUE            -> OK n body1 body2 ...
 *   commit S | rollback S | closeconsumer C | closesession S | unsubscribe S NAME
 *   tempqueue T S | temptopic T S | deletetemp T
 *   xaconnect URL | xasession S | xastart S GTRID | xaend S GTRID | xaprepare S GTRID
 *   xacommit S GTRID ONEPHASE | xarollback S GTRID | xarecover S
 *   close | halt
 * An XAException's message is prefixed with "errorCode=N ".
 */
public class OwClient {
    static Connection connection;
    static final Map<String, Session> sessions = new HashMap<>();
    static final Map<String, MessageProducer> producers = new HashMap<>();
    static final Map<String, MessageConsumer> consumers = new HashMap<>();
    static final Map<String, Message> last = new HashMap<>();
    static final Map<String, Destination> temps = new HashMap<>();
    static XAConnection xaConnection;
    static final Map<String, XASession> xaSessions = new HashMap<>();

    /** A Xid named by its global transaction id (format 1, branch "b"). */
    static class OwXid implements javax.transaction.xa.Xid {
        final byte[] gtrid;
        OwXid(String g) { gtrid = g.getBytes(StandardCharsets.UTF_8); }
        public int getFormatId() { return 1; }
        public byte[] getGlobalTransactionId() { return gtrid; }
        public byte[] getBranchQualifier() { return "b".getBytes(StandardCharsets.UTF_8); }
    }

    static String enc(Object o) {
        return o == null ? "-" : URLEncoder.encode(String.valueOf(o), StandardCharsets.UTF_8);
    }

    static String dec(String s) {
        return "-".equals(s) ? null : URLDecoder.decode(s, StandardCharsets.UTF_8);
    }

    static Destination dest(Session s, String d) throws JMSException {
        if (d.startsWith("queue:")) return s.createQueue(dec(d.substring(6)));
        if (d.startsWith("topic:")) return s.createTopic(dec(d.substring(6)));
        if (d.startsWith("temp:")) return temps.get(d.substring(5));
        throw new IllegalArgumentException("destination " + d);
    }

    static Object typed(String tv) {
        int i = tv.indexOf(':');
        String t = tv.substring(0, i), v = dec(tv.substring(i + 1));
        switch (t) {
            case "string": return v;
            case "boolean": return Boolean.valueOf(v);
            case "byte": return Byte.valueOf(v);
            case "short": return Short.valueOf(v);
            case "int": return Integer.valueOf(v);
            case "long": return Long.valueOf(v);
            case "float": return Float.valueOf(v);
            case "double": return Double.valueOf(v);
            case "char": return Character.valueOf(v.charAt(0));
            case "bytes": return hex(v);
            default: throw new IllegalArgumentException("type " + t);
        }
    }

    static byte[] hex(String h) {
        byte[] out = new byte[h.length() / 2];
        for (int i = 0; i < out.length; i++) out[i] = (byte) Integer.parseInt(h.substring(2 * i, 2 * i + 2), 16);
        return out;
    }

    static String hexOf(byte[] b) {
        StringBuilder sb = new StringBuilder();
        for (byte x : b) sb.append(String.format("%02x", x));
        return sb.toString();
    }

    static String show(Object v) {
        if (v == null) return "null:-";
        String t = v instanceof String ? "string" : v instanceof Boolean ? "boolean" : v instanceof Byte ? "byte"
            : v instanceof Short ? "short" : v instanceof Integer ? "int" : v instanceof Long ? "long"
            : v instanceof Float ? "float" : v instanceof Double ? "double" : v instanceof Character ? "char"
            : v instanceof byte[] ? "bytes" : v.getClass().getName();
        return t + ":" + enc(v instanceof byte[] ? hexOf((byte[]) v) : v);
    }

    static String destName(Destination d) {
        if (d == null) return "-";
        ActiveMQDestination a = (ActiveMQDestination) d;
        String kind = a.isTemporary() ? (a.isQueue() ? "tempqueue" : "temptopic") : (a.isQueue() ? "queue" : "topic");
        return kind + ":" + enc(a.getPhysicalName());
    }

    static String describe(Message m) throws JMSException {
        StringBuilder sb = new StringBuilder("MSG");
        String kind; String body;
        if (m instanceof TextMessage) { kind = "text"; body = enc(((TextMessage) m).getText()); }
        else if (m instanceof BytesMessage) {
            BytesMessage b = (BytesMessage) m; byte[] data = new byte[(int) b.getBodyLength()]; b.readBytes(data);
            kind = "bytes"; body = hexOf(data);
        } else if (m instanceof MapMessage) {
            MapMessage mm = (MapMessage) m; List<String> names = new ArrayList<>();
            for (Enumeration<?> e = mm.getMapNames(); e.hasMoreElements();) names.add((String) e.nextElement());
            java.util.Collections.sort(names); StringBuilder b = new StringBuilder();
            for (String n : names) b.append(n).append('=').append(show(mm.getObject(n))).append(';');
            kind = "map"; body = enc(b.toString());
        } else if (m instanceof StreamMessage) {
            StreamMessage sm = (StreamMessage) m; StringBuilder b = new StringBuilder();
            try { while (true) b.append(show(sm.readObject())).append(';'); } catch (MessageEOFException e) { }
            kind = "stream"; body = enc(b.toString());
        } else if (m instanceof ObjectMessage) { kind = "object"; body = enc(((ObjectMessage) m).getObject()); }
        else { kind = "message"; body = "-"; }
        sb.append(" kind=").append(kind).append(" body=").append(body);
        sb.append(" id=").append(enc(m.getJMSMessageID()));
        sb.append(" corr=").append(enc(m.getJMSCorrelationID()));
        sb.append(" type=").append(enc(m.getJMSType()));
        sb.append(" prio=").append(m.getJMSPriority());
        sb.append(" mode=").append(m.getJMSDeliveryMode());
        sb.append(" exp=").append(m.getJMSExpiration());
        sb.append(" ts=").append(m.getJMSTimestamp());
        sb.append(" redelivered=").append(m.getJMSRedelivered());
        sb.append(" count=").append(m.getIntProperty("JMSXDeliveryCount"));
        sb.append(" dest=").append(destName(m.getJMSDestination()));
        sb.append(" replyto=").append(destName(m.getJMSReplyTo()));
        sb.append(" group=").append(enc(m.getStringProperty("JMSXGroupID")));
        List<String> names = new ArrayList<>();
        for (Enumeration<?> e = m.getPropertyNames(); e.hasMoreElements();) names.add((String) e.nextElement());
        java.util.Collections.sort(names);
        for (String n : names) {
            if (n.startsWith("JMSX")) continue;
            sb.append(" prop.").append(n).append('=').append(show(m.getObjectProperty(n)));
        }
        return sb.toString();
    }

    static String run(String[] a) throws Exception {
        switch (a[0]) {
            case "connect": {
                ActiveMQConnectionFactory f = new ActiveMQConnectionFactory(dec(a[1]));
                connection = a.length > 2 && dec(a[2]) != null ? f.createConnection(dec(a[2]), dec(a[3])) : f.createConnection();
                if (a.length > 4 && dec(a[4]) != null) connection.setClientID(dec(a[4]));
                connection.start();
                return "OK";
            }
            case "session": {
                boolean tx = Boolean.parseBoolean(a[2]);
                int mode = tx ? Session.SESSION_TRANSACTED : "client".equals(a[3]) ? Session.CLIENT_ACKNOWLEDGE
                    : "individual".equals(a[3]) ? 4 : "dups".equals(a[3]) ? Session.DUPS_OK_ACKNOWLEDGE : Session.AUTO_ACKNOWLEDGE;
                sessions.put(a[1], connection.createSession(tx, mode));
                return "OK";
            }
            case "producer": {
                Session s = sessions.get(a[2]);
                MessageProducer p = s.createProducer("-".equals(a[3]) ? null : dest(s, a[3]));
                if (a.length > 4) p.setDeliveryMode("persistent".equals(a[4]) ? DeliveryMode.PERSISTENT : DeliveryMode.NON_PERSISTENT);
                producers.put(a[1], p);
                sessions.put("producer-session:" + a[1], s);
                return "OK";
            }
            case "send": {
                MessageProducer p = producers.get(a[1]);
                Session s = sessions.get("producer-session:" + a[1]);
                Message m;
                String body = dec(a[3]);
                switch (a[2]) {
                    case "text": m = s.createTextMessage(body); break;
                    case "bytes": { BytesMessage b = s.createBytesMessage(); b.writeBytes(hex(body == null ? "" : body)); m = b; break; }
                    case "map": {
                        MapMessage mm = s.createMapMessage();
                        if (body != null) for (String kv : body.split(";")) { if (kv.isEmpty()) continue; int i = kv.indexOf('='); mm.setObject(kv.substring(0, i), typed(kv.substring(i + 1))); }
                        m = mm; break;
                    }
                    case "stream": {
                        StreamMessage sm = s.createStreamMessage();
                        if (body != null) for (String tv : body.split(";")) if (!tv.isEmpty()) sm.writeObject(typed(tv));
                        m = sm; break;
                    }
                    case "object": m = s.createObjectMessage(body); break;
                    default: m = s.createMessage();
                }
                int prio = p.getPriority(); long ttl = p.getTimeToLive(); int mode = p.getDeliveryMode();
                Destination target = null;
                for (int i = 4; i < a.length; i++) {
                    int eq = a[i].indexOf('=');
                    String k = a[i].substring(0, eq), v = a[i].substring(eq + 1);
                    if (k.startsWith("prop.")) m.setObjectProperty(k.substring(5), typed(v));
                    else if (k.equals("corr")) m.setJMSCorrelationID(dec(v));
                    else if (k.equals("type")) m.setJMSType(dec(v));
                    else if (k.equals("prio")) prio = Integer.parseInt(v);
                    else if (k.equals("ttl")) ttl = Long.parseLong(v);
                    else if (k.equals("group")) m.setStringProperty("JMSXGroupID", dec(v));
                    else if (k.equals("groupseq")) m.setIntProperty("JMSXGroupSeq", Integer.parseInt(v));
                    else if (k.equals("replyto")) m.setJMSReplyTo(dest(s, v));
                    else if (k.equals("to")) target = dest(s, v);
                    else if (k.equals("mode")) mode = "persistent".equals(v) ? DeliveryMode.PERSISTENT : DeliveryMode.NON_PERSISTENT;
                }
                if (target != null) p.send(target, m, mode, prio, ttl); else p.send(m, mode, prio, ttl);
                return "OK " + enc(m.getJMSMessageID());
            }
            case "consumer": {
                Session s = sessions.get(a[2]);
                Destination d = dest(s, a[3]);
                String selector = null, durable = null; boolean noLocal = false;
                for (int i = 4; i < a.length; i++) {
                    if (a[i].startsWith("selector=")) selector = dec(a[i].substring(9));
                    else if (a[i].startsWith("durable=")) durable = dec(a[i].substring(8));
                    else if (a[i].equals("nolocal")) noLocal = true;
                }
                MessageConsumer c = durable != null ? s.createDurableSubscriber((Topic) d, durable, selector, noLocal)
                    : s.createConsumer(d, selector, noLocal);
                consumers.put(a[1], c);
                return "OK";
            }
            case "receive": {
                long t = Long.parseLong(a[2]);
                Message m = t < 0 ? consumers.get(a[1]).receiveNoWait() : consumers.get(a[1]).receive(t);
                if (m == null) return "OK NONE";
                last.put(a[1], m);
                return "OK " + describe(m);
            }
            case "ack": last.get(a[1]).acknowledge(); return "OK";
            case "reply": {
                Session s = sessions.get(a[2]);
                MessageProducer p = s.createProducer(null);
                p.send(last.get(a[1]).getJMSReplyTo(), s.createTextMessage(dec(a[3])));
                p.close();
                return "OK";
            }
            case "browse": {
                Session s = sessions.get(a[1]);
                QueueBrowser b = s.createBrowser((Queue) dest(s, a[2]));
                StringBuilder sb = new StringBuilder(); int n = 0;
                for (Enumeration<?> e = b.getEnumeration(); e.hasMoreElements();) {
                    Message m = (Message) e.nextElement(); n++;
                    sb.append(' ').append(m instanceof TextMessage ? enc(((TextMessage) m).getText()) : "-");
                }
                b.close();
                return "OK " + n + sb;
            }
            case "commit": sessions.get(a[1]).commit(); return "OK";
            case "rollback": sessions.get(a[1]).rollback(); return "OK";
            case "closeconsumer": consumers.remove(a[1]).close(); return "OK";
            case "closesession": sessions.remove(a[1]).close(); return "OK";
            case "unsubscribe": sessions.get(a[1]).unsubscribe(dec(a[2])); return "OK";
            case "tempqueue": { Destination d = sessions.get(a[2]).createTemporaryQueue(); temps.put(a[1], d); return "OK " + destName(d); }
            case "temptopic": { Destination d = sessions.get(a[2]).createTemporaryTopic(); temps.put(a[1], d); return "OK " + destName(d); }
            case "deletetemp": {
                Destination d = temps.remove(a[1]);
                if (d instanceof TemporaryQueue) ((TemporaryQueue) d).delete(); else ((TemporaryTopic) d).delete();
                return "OK";
            }
            case "xaconnect": {
                org.apache.activemq.ActiveMQXAConnectionFactory f = new org.apache.activemq.ActiveMQXAConnectionFactory(dec(a[1]));
                xaConnection = f.createXAConnection();
                xaConnection.start();
                connection = xaConnection;
                return "OK";
            }
            case "xasession": {
                XASession x = xaConnection.createXASession();
                xaSessions.put(a[1], x);
                sessions.put(a[1], x.getSession());
                return "OK";
            }
            case "xastart": xaSessions.get(a[1]).getXAResource().start(new OwXid(a[2]), javax.transaction.xa.XAResource.TMNOFLAGS); return "OK";
            case "xaend": xaSessions.get(a[1]).getXAResource().end(new OwXid(a[2]), javax.transaction.xa.XAResource.TMSUCCESS); return "OK";
            case "xaprepare": return "OK " + xaSessions.get(a[1]).getXAResource().prepare(new OwXid(a[2]));
            case "xacommit": xaSessions.get(a[1]).getXAResource().commit(new OwXid(a[2]), Boolean.parseBoolean(a[3])); return "OK";
            case "xarollback": xaSessions.get(a[1]).getXAResource().rollback(new OwXid(a[2])); return "OK";
            case "xarecover": {
                StringBuilder sb = new StringBuilder();
                for (javax.transaction.xa.Xid x : xaSessions.get(a[1]).getXAResource().recover(javax.transaction.xa.XAResource.TMSTARTRSCAN))
                    sb.append(' ').append(new String(x.getGlobalTransactionId(), StandardCharsets.UTF_8));
                return "OK" + sb;
            }
            case "close": connection.close(); return "OK";
            case "halt": System.out.println("OK"); System.out.flush(); Runtime.getRuntime().halt(0); return "OK";
            default: return "ERR unknown-command " + a[0];
        }
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) continue;
            String answer;
            try {
                answer = run(line.split(" "));
            } catch (Throwable e) {
                Throwable t = e;
                String message = t.getMessage();
                if (t instanceof javax.transaction.xa.XAException)  // its error code first
                    message = "errorCode=" + ((javax.transaction.xa.XAException) t).errorCode + " " + message;
                answer = "ERR " + t.getClass().getName() + " " + enc(message);
            }
            System.out.println(answer);
            System.out.flush();
        }
        if (connection != null) try { connection.close(); } catch (JMSException e) { }
    }
}
