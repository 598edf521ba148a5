// Golden vectors for Hermod's OpenWire codec, made by the real ActiveMQ Classic client library
// (Debian's libactivemq-java): compiled with plain javac by tests/openwire/test_java_golden.py.
//
//   java OpenWireGolden golden   prints "VERSION TIGHT CACHE TRACE NAME HEX" for every command of
//                                the fixed list below, marshalled by OpenWireFormat in every
//                                version (9-12), loose and tight, with and without the cache
//                                (and in version 12 without stack traces too).
//   java OpenWireGolden echo     reads "VERSION TIGHT CACHE TRACE HEX" lines, unmarshals each with
//                                OpenWireFormat (one per format, in order, so the cache state
//                                carries over), marshals it again with a fresh format per
//                                combination and prints "CLASS HEX" (or "ERROR message").
// The Python side (expected_commands in the test) builds the same list.

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.zip.DeflaterOutputStream;

import org.apache.activemq.command.*;
import org.apache.activemq.openwire.OpenWireFormat;
import org.apache.activemq.openwire.OpenWireFormatFactory;
import org.apache.activemq.util.ByteSequence;
import org.apache.activemq.util.MarshallingSupport;

public class OpenWireGolden {

    static final StackTraceElement[] TRACE = {
        new StackTraceElement("org.example.Sender", "send", "Sender.java", 42),
        new StackTraceElement("org.example.Main", "main", null, -1),
    };

    static <T extends Throwable> T fixed(T t) {
        t.setStackTrace(TRACE);
        return t;
    }

    static String repeat(String s, int n) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < n; i++) b.append(s);
        return b.toString();
    }

    static List<Object[]> commands() throws Exception {
        List<Object[]> out = new ArrayList<>();
        ConnectionId conn = new ConnectionId("ID:host-40000-1700000000000-1:1");
        SessionId session = new SessionId(conn, 1);
        ProducerId producer = new ProducerId(session, 1);
        ConsumerId consumer = new ConsumerId(session, 1);
        ActiveMQQueue queue = new ActiveMQQueue("orders");
        ActiveMQTopic topic = new ActiveMQTopic("prices.>");
        ActiveMQTempQueue tempQueue = new ActiveMQTempQueue("ID:host-40000-1700000000000-1:1:1");
        BrokerId brokerId = new BrokerId("ID:broker-1");

        out.add(new Object[] {"wireformat", ((OpenWireFormat) new OpenWireFormatFactory().createWireFormat()).getPreferedWireFormatInfo()});

        BrokerInfo peer = new BrokerInfo();
        peer.setBrokerId(new BrokerId("ID:peer-2"));
        peer.setBrokerName("peer");
        BrokerInfo broker = new BrokerInfo();
        broker.setBrokerId(brokerId);
        broker.setBrokerURL("tcp://localhost:61616");
        broker.setBrokerName("hermod");
        broker.setPeerBrokerInfos(new BrokerInfo[] {peer});
        broker.setFaultTolerantConfiguration(true);
        broker.setConnectionId(70000);
        broker.setNetworkProperties("a=b");
        out.add(new Object[] {"broker", broker});

        ConnectionInfo ci = new ConnectionInfo(conn);
        ci.setCommandId(1);
        ci.setResponseRequired(true);
        ci.setClientId("client-\u00e9");
        ci.setUserName("user");
        ci.setPassword("p\u00e4ssw\u00f6rd");
        ci.setManageable(true);
        ci.setClientMaster(true);
        ci.setFaultTolerant(false);
        ci.setFailoverReconnect(false);
        ci.setBrokerPath(new BrokerId[] {brokerId});
        out.add(new Object[] {"connection", ci});

        SessionInfo si = new SessionInfo(session);
        si.setCommandId(2);
        si.setResponseRequired(true);
        out.add(new Object[] {"session", si});

        ProducerInfo pi = new ProducerInfo(producer);
        pi.setCommandId(3);
        pi.setDestination(queue);
        pi.setWindowSize(1024);
        pi.setDispatchAsync(true);
        out.add(new Object[] {"producer", pi});

        ConsumerInfo coi = new ConsumerInfo(consumer);
        coi.setCommandId(4);
        coi.setResponseRequired(true);
        coi.setDestination(topic);
        coi.setPrefetchSize(1000);
        coi.setMaximumPendingMessageLimit(10);
        coi.setSelector("color = 'red' AND weight > 2.5");
        coi.setClientId("client-\u00e9");
        coi.setSubscriptionName("sub");
        coi.setNoLocal(true);
        coi.setExclusive(true);
        coi.setPriority((byte) 5);
        coi.setDispatchAsync(true);
        coi.setNetworkConsumerPath(new ConsumerId[] {consumer});
        out.add(new Object[] {"consumer", coi});

        LocalTransactionId ltx = new LocalTransactionId(conn, 5);
        out.add(new Object[] {"begin", new TransactionInfo(conn, ltx, TransactionInfo.BEGIN)});

        XATransactionId xid = new XATransactionId();
        xid.setFormatId(0x1234);
        xid.setGlobalTransactionId(new byte[] {1, 2, 3, (byte) 0xff});
        xid.setBranchQualifier(new byte[] {9});
        out.add(new Object[] {"prepare", new TransactionInfo(conn, xid, TransactionInfo.PREPARE)});

        DestinationInfo di = new DestinationInfo(conn, DestinationInfo.ADD_OPERATION_TYPE, tempQueue);
        di.setTimeout(0);
        out.add(new Object[] {"destination", di});

        RemoveSubscriptionInfo rsi = new RemoveSubscriptionInfo();
        rsi.setConnectionId(conn);
        rsi.setSubcriptionName("sub");
        rsi.setClientId("client");
        out.add(new Object[] {"unsubscribe", rsi});

        out.add(new Object[] {"keepalive", new KeepAliveInfo()});
        out.add(new Object[] {"shutdown", new ShutdownInfo()});
        out.add(new Object[] {"flush", new FlushCommand()});

        RemoveInfo ri = new RemoveInfo(consumer);
        ri.setLastDeliveredSequenceId(-1);
        out.add(new Object[] {"remove", ri});

        ControlCommand cc = new ControlCommand();
        cc.setCommand("shutdown");
        out.add(new Object[] {"control", cc});

        ConnectionError ce = new ConnectionError();
        ce.setException(fixed(new java.io.IOException("gone", fixed(new IllegalStateException("inner")))));
        ce.setConnectionId(conn);
        out.add(new Object[] {"connection-error", ce});

        ConsumerControl cctl = new ConsumerControl();
        cctl.setConsumerId(consumer);
        cctl.setDestination(topic);
        cctl.setPrefetch(0);
        cctl.setStart(true);
        out.add(new Object[] {"consumer-control", cctl});

        ConnectionControl conctl = new ConnectionControl();
        conctl.setFaultTolerant(true);
        conctl.setReconnectTo("tcp://other:61616");
        conctl.setToken(new byte[] {7, 7});
        out.add(new Object[] {"connection-control", conctl});

        out.add(new Object[] {"producer-ack", new ProducerAck(producer, 4096)});

        MessagePull pull = new MessagePull();
        pull.setConsumerId(consumer);
        pull.setDestination(queue);
        pull.setTimeout(5000);
        pull.setCorrelationId("pull-1");
        out.add(new Object[] {"pull", pull});

        MessageId mid = new MessageId(producer, 1);
        mid.setTextView("ID:host-40000-1700000000000-1:1:1:1:1");
        ActiveMQTextMessage text = new ActiveMQTextMessage();
        text.setCommandId(9);
        text.setResponseRequired(true);
        text.setProducerId(producer);
        text.setDestination(queue);
        text.setMessageId(mid);
        text.setPersistent(true);
        text.setPriority((byte) 4);
        text.setTimestamp(1700000000123L);
        text.setExpiration(1700000060123L);
        text.setCorrelationId("corr-\u00fc");
        text.setType("order");
        text.setGroupID("group-1");
        text.setGroupSequence(3);
        text.setReplyTo(tempQueue);
        text.setUserID("user");
        text.setBrokerPath(new BrokerId[] {brokerId});
        text.setArrival(1700000000200L);
        text.setBrokerInTime(1700000000201L);
        text.setBrokerOutTime(1700000000202L);
        text.setJMSXGroupFirstForConsumer(true);
        text.setText("h\u00e9llo w\u00f6rld \ud83d\ude00 \u0000 end");
        Map<String, Object> nested = new LinkedHashMap<>();
        nested.put("k", "v");
        nested.put("n", 1);
        List<Object> list = new ArrayList<>();
        list.add(1L);
        list.add("two");
        list.add(null);
        text.setProperty("bool", Boolean.TRUE);
        text.setProperty("byte", (byte) -7);
        text.setProperty("char", 'x');
        text.setProperty("short", (short) -300);
        text.setProperty("int", 70000);
        text.setProperty("long", 1L << 40);
        text.setProperty("float", 2.5f);
        text.setProperty("double", -0.125);
        text.setProperty("string", "caf\u00e9");
        text.setProperty("bigstring", repeat("ab", 5000));
        text.setProperty("bytes", new byte[] {0, 1, (byte) 0xfe});
        text.setProperty("map", nested);
        text.setProperty("list", list);
        text.setProperty("null", null);
        out.add(new Object[] {"text", text});

        ActiveMQBytesMessage bytes = new ActiveMQBytesMessage();
        bytes.setProducerId(producer);
        bytes.setDestination(topic);
        bytes.setMessageId(new MessageId(producer, 2));
        byte[] all = new byte[256];
        for (int i = 0; i < 256; i++) all[i] = (byte) i;
        bytes.writeBytes(all);
        bytes.setTransactionId(ltx);
        bytes.storeContent();  // as a producer's send does
        out.add(new Object[] {"bytes", bytes});

        ActiveMQMapMessage map = new ActiveMQMapMessage();
        map.setProducerId(producer);
        map.setDestination(queue);
        map.setMessageId(new MessageId(producer, 3));
        map.setString("name", "widget");
        map.setInt("count", 3);
        map.setBoolean("ok", false);
        map.setBytes("raw", new byte[] {5});
        map.storeContent();
        out.add(new Object[] {"map", map});

        ActiveMQStreamMessage stream = new ActiveMQStreamMessage();
        stream.setProducerId(producer);
        stream.setDestination(queue);
        stream.setMessageId(new MessageId(producer, 4));
        stream.writeString("first");
        stream.writeInt(2);
        stream.writeBoolean(true);
        stream.writeDouble(3.5);
        stream.writeChar('z');
        stream.writeBytes(new byte[] {1, 2});
        stream.storeContent();
        out.add(new Object[] {"stream", stream});

        ActiveMQObjectMessage object = new ActiveMQObjectMessage();
        object.setProducerId(producer);
        object.setDestination(queue);
        object.setMessageId(new MessageId(producer, 5));
        object.setObject("a serialized string");
        out.add(new Object[] {"object", object});

        ActiveMQMessage plain = new ActiveMQMessage();
        plain.setProducerId(producer);
        plain.setDestination(new ActiveMQTempTopic("ID:temp-topic-1"));
        plain.setMessageId(new MessageId(producer, 6));
        plain.setDataStructure(coi);
        out.add(new Object[] {"advisory", plain});

        ActiveMQTextMessage zipped = new ActiveMQTextMessage();
        zipped.setProducerId(producer);
        zipped.setDestination(queue);
        zipped.setMessageId(new MessageId(producer, 7));
        ByteArrayOutputStream zbytes = new ByteArrayOutputStream();
        DataOutputStream zout = new DataOutputStream(new DeflaterOutputStream(zbytes));
        MarshallingSupport.writeUTF8(zout, repeat("compress me ", 1000));
        zout.close();
        zipped.setContent(new ByteSequence(zbytes.toByteArray()));
        zipped.setCompressed(true);
        out.add(new Object[] {"compressed", zipped});

        ActiveMQTextMessage large = new ActiveMQTextMessage();
        large.setProducerId(producer);
        large.setDestination(queue);
        large.setMessageId(new MessageId(producer, 8));
        large.setText(repeat("0123456789\u00e9", 10000));
        out.add(new Object[] {"large", large});

        ActiveMQBlobMessage blob = new ActiveMQBlobMessage();
        blob.setProducerId(producer);
        blob.setDestination(queue);
        blob.setMessageId(new MessageId(producer, 9));
        blob.setRemoteBlobUrl("http://blobs/1");
        blob.setMimeType("text/plain");
        out.add(new Object[] {"blob", blob});

        ActiveMQTextMessage dispatched = new ActiveMQTextMessage();
        dispatched.setProducerId(producer);
        dispatched.setDestination(queue);
        dispatched.setMessageId(new MessageId(producer, 10));
        dispatched.setText("to you");
        dispatched.setRedeliveryCounter(2);
        dispatched.setTargetConsumerId(consumer);
        MessageDispatch md = new MessageDispatch();
        md.setConsumerId(consumer);
        md.setDestination(queue);
        md.setMessage(dispatched);
        md.setRedeliveryCounter(2);
        out.add(new Object[] {"dispatch", md});

        MessageAck ack = new MessageAck();
        ack.setCommandId(11);
        ack.setDestination(queue);
        ack.setConsumerId(consumer);
        ack.setTransactionId(ltx);
        ack.setAckType(MessageAck.STANDARD_ACK_TYPE);
        ack.setFirstMessageId(new MessageId(producer, 1));
        ack.setLastMessageId(new MessageId(producer, 10));
        ack.setMessageCount(10);
        out.add(new Object[] {"ack", ack});

        MessageAck poison = new MessageAck();
        poison.setDestination(queue);
        poison.setConsumerId(consumer);
        poison.setAckType(MessageAck.POISON_ACK_TYPE);
        poison.setLastMessageId(new MessageId(producer, 10));
        poison.setMessageCount(1);
        poison.setPoisonCause(fixed(new Throwable("Delivery[7] exceeds redelivery policy limit", fixed(new RuntimeException("handler failed")))));
        out.add(new Object[] {"poison", poison});

        Response response = new Response();
        response.setCorrelationId(7);
        out.add(new Object[] {"response", response});

        ExceptionResponse er = new ExceptionResponse(fixed(new javax.jms.JMSSecurityException("User name [x] or password is invalid.")));
        er.setCorrelationId(8);
        out.add(new Object[] {"exception", er});

        DataResponse dr = new DataResponse();
        dr.setCorrelationId(9);
        dr.setData(consumer);
        out.add(new Object[] {"data", dr});

        SubscriptionInfo sub = new SubscriptionInfo();
        sub.setClientId("client");
        sub.setDestination(topic);
        sub.setSubcriptionName("sub");
        sub.setSelector("a > 1");
        sub.setSubscribedDestination(topic);
        sub.setNoLocal(true);
        DataArrayResponse dar = new DataArrayResponse();
        dar.setCorrelationId(10);
        dar.setData(new DataStructure[] {sub});
        out.add(new Object[] {"data-array", dar});

        IntegerResponse ir = new IntegerResponse();
        ir.setCorrelationId(11);
        ir.setResult(42);
        out.add(new Object[] {"integer", ir});

        MessageDispatchNotification mdn = new MessageDispatchNotification();
        mdn.setConsumerId(consumer);
        mdn.setDestination(queue);
        mdn.setDeliverySequenceId(1L << 33);
        mdn.setMessageId(new MessageId(producer, 1));
        out.add(new Object[] {"dispatch-notification", mdn});
        return out;
    }

    static OpenWireFormat format(int version, boolean tight, boolean cache, boolean trace) {
        OpenWireFormat f = new OpenWireFormat(version);
        f.setTightEncodingEnabled(tight);
        f.setCacheEnabled(cache);
        f.setStackTraceEnabled(trace);
        return f;
    }

    static String hex(ByteSequence s) {
        StringBuilder b = new StringBuilder();
        for (int i = s.getOffset(); i < s.getOffset() + s.getLength(); i++) {
            b.append(String.format("%02x", s.getData()[i] & 0xff));
        }
        return b.toString();
    }

    static byte[] unhex(String s) {
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("golden")) {
            for (int version = 9; version <= 12; version++) {
                for (boolean tight : new boolean[] {false, true}) {
                    for (boolean cache : new boolean[] {false, true}) {
                        // stack traces off only in version 12: they change exceptions alone
                        for (boolean trace : version == 12 ? new boolean[] {true, false} : new boolean[] {true}) {
                            OpenWireFormat f = format(version, tight, cache, trace);
                            for (Object[] c : commands()) {
                                System.out.println(version + " " + tight + " " + cache + " " + trace + " " + c[0] + " " + hex(f.marshal(c[1])));
                            }
                        }
                    }
                }
            }
        } else {
            Map<String, OpenWireFormat[]> formats = new HashMap<>();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
            String line;
            while ((line = in.readLine()) != null) {
                String[] p = line.split(" ");
                String key = p[0] + " " + p[1] + " " + p[2] + " " + p[3];
                OpenWireFormat[] pair = formats.computeIfAbsent(key, k -> new OpenWireFormat[] {
                    format(Integer.parseInt(p[0]), Boolean.parseBoolean(p[1]), Boolean.parseBoolean(p[2]), Boolean.parseBoolean(p[3])),
                    format(Integer.parseInt(p[0]), Boolean.parseBoolean(p[1]), Boolean.parseBoolean(p[2]), Boolean.parseBoolean(p[3]))});
                try {
                    Object command = pair[0].unmarshal(new ByteSequence(unhex(p[4])));
                    System.out.println(command.getClass().getSimpleName() + " " + hex(pair[1].marshal(command)));
                } catch (Exception e) {
                    System.out.println("ERROR " + e);
                }
            }
        }
        System.out.flush();
    }
}
