// @stomp/stompjs (the browser STOMP client) over Node's `ws`: connect to a Hermod WebSocket
// listener, subscribe with client-individual acks, send COUNT text messages with a header, read
// and ack them, then DISCONNECT. Prints one JSON line: what it received and the negotiated version.
//   node roundtrip.js ws://127.0.0.1:PORT/ /queue/NAME COUNT [login passcode]
'use strict';
const { Client } = require('@stomp/stompjs');
const WebSocket = require('ws');

const [url, destination, countArg, login, passcode] = process.argv.slice(2);
const count = Number(countArg || 3);
const received = [];
let finished = false;

function done(result, code) {
  if (finished) return;
  finished = true;
  process.stdout.write(JSON.stringify(result) + '\n');
  client.deactivate().finally(() => process.exit(code));
}

const client = new Client({
  webSocketFactory: () => new WebSocket(url, ['v12.stomp', 'v11.stomp', 'v10.stomp']),
  connectHeaders: login ? { login, passcode } : {},
  reconnectDelay: 0,
  heartbeatIncoming: 1000,
  heartbeatOutgoing: 1000,
  onStompError: (frame) => done({ error: frame.headers.message || 'ERROR' }, 2),
  onWebSocketError: () => done({ error: 'websocket error' }, 3),
});

client.onConnect = (frame) => {
  client.subscribe(destination, (message) => {
    received.push({ body: message.body, note: message.headers.note, destination: message.headers.destination,
                    redelivered: message.headers.redelivered || null });
    message.ack();
    if (received.length === count) {
      done({ version: frame.headers.version, received }, 0);
    }
  }, { ack: 'client-individual' });
  for (let i = 0; i < count; i++) {
    client.publish({ destination, body: `from stompjs ${i}`, headers: { note: 'a:b\nc' } });
  }
};

setTimeout(() => done({ error: 'timeout', received }, 4), 20000);
client.activate();
