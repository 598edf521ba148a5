// mqtt.js client for Hermod's MQTT tests: subscribe to TOPIC, publish COUNT messages to it at
// QoS, and print one JSON line with what came back (topic, payload, qos, properties).
//   node pubsub.js URL VERSION TOPIC COUNT QOS [USER PASSWORD]
// URL: mqtt://host:port or ws://host:port/path (subprotocol mqtt); VERSION: 4 or 5.
'use strict';
const mqtt = require('mqtt');

const [url, version, topic, count, qos, username, password] = process.argv.slice(2);
const n = Number(count);
const level = Number(qos);
const options = { protocolVersion: Number(version), clean: true, connectTimeout: 10000, reconnectPeriod: 0 };
if (options.protocolVersion === 3) options.protocolId = 'MQIsdp';  // MQTT 3.1 (WebSocket subprotocol mqttv3.1)
if (username) { options.username = username; options.password = password; }
const client = mqtt.connect(url, options);
const got = [];
const timer = setTimeout(() => finish(2, 'timed out'), 20000);

function finish(code, error) {
  clearTimeout(timer);
  console.log(JSON.stringify({ error: error || null, messages: got }));
  client.end(true, () => process.exit(code));
}

client.on('error', (e) => finish(1, String(e && e.message || e)));
client.on('message', (t, payload, packet) => {
  got.push({ topic: t, payload: payload.toString('utf8'), qos: packet.qos,
             user: packet.properties && packet.properties.userProperties || null });
  if (got.length === n) finish(0);
});
client.on('connect', () => {
  client.subscribe(topic, { qos: level }, (err, granted) => {
    if (err) return finish(1, String(err.message || err));
    if (granted[0].qos >= 128) return finish(1, `subscription refused: ${granted[0].qos}`);
    for (let i = 0; i < n; i++) {
      const opts = { qos: level };
      if (options.protocolVersion === 5) opts.properties = { userProperties: { seq: String(i) } };
      client.publish(topic, `mqttjs-${i}`, opts);
    }
  });
});
