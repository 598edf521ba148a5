// mqtt.js load generator for benchmarks/mqtt_bench.py: SUBS subscribers on TOPIC, one publisher
// sending COUNT messages of SIZE bytes at QOS as fast as its window allows; prints one JSON line
// with the seconds from the first publish to the last delivery at every subscriber.
//   node bench.js URL TOPIC COUNT SIZE QOS SUBS
'use strict';
const mqtt = require('mqtt');

const [url, topic, count, size, qos, subs] = process.argv.slice(2);
const n = Number(count);
const level = Number(qos);
const nsubs = Number(subs);
const payload = Buffer.alloc(Number(size), 'x');
const opts = { protocolVersion: 4, clean: true, reconnectPeriod: 0, connectTimeout: 20000 };
let ready = 0;
let done = 0;
let start = 0;
const subscribers = [];
const timer = setTimeout(() => { console.log(JSON.stringify({ error: 'timed out', done })); process.exit(2); }, 120000);

for (let i = 0; i < nsubs; i++) {
  const c = mqtt.connect(url, { ...opts, clientId: `bench-sub-${i}-${process.pid}` });
  let got = 0;
  c.on('message', () => {
    got += 1;
    if (got === n) {
      done += 1;
      if (done === nsubs) finish();
    }
  });
  c.on('connect', () => c.subscribe(topic, { qos: level }, () => { ready += 1; if (ready === nsubs) publish(); }));
  subscribers.push(c);
}

function publish() {
  const p = mqtt.connect(url, { ...opts, clientId: `bench-pub-${process.pid}` });
  p.on('connect', () => {
    start = process.hrtime.bigint();
    let sent = 0;
    const next = () => {
      while (sent < n) {
        sent += 1;
        if (level === 0) {
          if (!p.publish(topic, payload, { qos: 0 })) { setImmediate(next); return; }
        } else {
          p.publish(topic, payload, { qos: level });
        }
        if (sent % 1000 === 0) { setImmediate(next); return; }
      }
    };
    next();
  });
}

function finish() {
  clearTimeout(timer);
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  console.log(JSON.stringify({ seconds, messages: n, subscribers: nsubs, deliveries: n * nsubs }));
  process.exit(0);
}
