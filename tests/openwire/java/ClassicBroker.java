/** ActiveMQ Classic 5.17.2 (Debian's libactivemq-java), embedded, non-persistent, one OpenWire connector on a free
 * port (printed as "PORT n"); it stops when stdin closes. The comparison tests run the same JMS scenarios
 * against it and against Hermod. */
import org.apache.activemq.broker.BrokerService;
import org.apache.activemq.broker.TransportConnector;
public class ClassicBroker {
    public static void main(String[] a) throws Exception {
        BrokerService b = new BrokerService();
        b.setPersistent(false); b.setUseJmx(false); b.setAdvisorySupport(true);
        TransportConnector t = b.addConnector("tcp://127.0.0.1:0");
        b.start(); b.waitUntilStarted();
        System.out.println("PORT " + t.getConnectUri().getPort()); System.out.flush();
        System.in.read();
        b.stop();
    }
}
