#!/usr/bin/env node
'use strict';
/*
 * AMQP over WebSocket with rhea (container.websocket_connect over the `ws` package): send one
 * message of each given size to an address, receive them back, and print what arrived.
 *
 * stdout, one JSON object per line:
 *   {"event":"open","max_frame_size":N}          the broker's open (its advertised max frame size)
 *   {"event":"message","n":0,"size":N,"sha256":"..."}   each message received, in order
 *   {"event":"summary","sent":N,"received":N}
 *   {"event":"error","where":"connection","condition":"amqp:unauthorized-access","description":"..."}
 * Exit status: 0 done, 2 error, 3 timed out, 64 bad usage.
 *
 * Bodies are data sections of a fixed byte pattern (byte i of message n is (i + n) % 251), so the
 * test computes the same sha256 without the bytes crossing a pipe.
 */
const crypto = require('crypto');
const fs = require('fs');
const WebSocket = require('ws');
const c = require('./common.js');

const USAGE = `usage: node ws.js --url ws://[USER:PASS@]HOST:PORT/PATH --address ADDRESS [options]
  --size N        one message of N bytes (repeatable; default one of 10 bytes)
  --max-frame N   this client's own max frame size (default 4294967295)
  --timeout S     give up after this long (default 30)
  HERMOD_CA=FILE  for wss://, the CA file the server certificate is verified against`;

const args = c.parseArgs(process.argv.slice(2), {
    url: {type: 'string'},
    address: {type: 'string'},
    size: {type: 'list'},
    'max-frame': {type: 'int', default: 4294967295},
    timeout: {type: 'float', default: 30},
}, USAGE);
if (!args.url || !args.address) c.fail(USAGE);
const sizes = (args.size.length ? args.size : ['10']).map(Number);

function body(n, size) {
    const b = Buffer.allocUnsafe(size);
    for (let i = 0; i < size; i++) b[i] = (i + n) % 251;
    return b;
}

const u = new URL(args.url);
if (u.protocol !== 'ws:' && u.protocol !== 'wss:') c.fail(`only ws:// and wss:// urls, got ${args.url}`);
const wsOptions = {};
if (u.protocol === 'wss:' && process.env.HERMOD_CA) wsOptions.ca = [fs.readFileSync(process.env.HERMOD_CA)];
const options = {
    reconnect: false,
    max_frame_size: args['max-frame'],
    idle_time_out: 30000,
};
if (u.username) {
    options.username = decodeURIComponent(u.username);
    options.password = decodeURIComponent(u.password);
    u.username = '';
    u.password = '';
}
const container = c.rhea.create_container();
options.connection_details = container.websocket_connect(WebSocket)(u.toString(), ['amqp'], wsOptions);

let received = 0;
let failed = false;
const cancel = c.deadline(args.timeout, () => ({sent: sizes.length, received}));
const connection = container.connect(options);

function fail(where, error) {
    if (failed) return;
    failed = true;
    cancel();
    c.emit(c.errorEvent(where, error));
    process.exit(2);
}

connection.on('connection_open', (ctx) => {
    c.emit({event: 'open', max_frame_size: ctx.connection.remote.open.max_frame_size});
    const receiver = connection.open_receiver({source: args.address, credit_window: 0, autoaccept: true});
    receiver.add_credit(sizes.length);
    const sender = connection.open_sender(args.address);
    let next = 0;
    sender.on('sendable', () => {
        while (next < sizes.length && sender.sendable()) {
            sender.send({body: c.rhea.message.data_section(body(next, sizes[next]))});
            next++;
        }
    });
    sender.on('rejected', (ctx2) => fail('delivery', ctx2.delivery.remote_state && ctx2.delivery.remote_state.error));
    receiver.on('message', (ctx2) => {
        let data = ctx2.message.body;
        if (data && data.typecode === 0x75) data = data.content;
        if (!Buffer.isBuffer(data)) data = Buffer.alloc(0);
        c.emit({event: 'message', n: received, size: data.length,
                sha256: crypto.createHash('sha256').update(data).digest('hex')});
        received++;
        if (received === sizes.length) {
            cancel();
            c.emit({event: 'summary', sent: sizes.length, received});
            connection.close();
        }
    });
    receiver.on('receiver_error', (ctx2) => fail('receiver', ctx2.receiver.error));
    sender.on('sender_error', (ctx2) => fail('sender', ctx2.sender.error));
});
connection.on('connection_close', () => process.exit(failed ? 2 : 0));
connection.on('connection_error', (ctx) => fail('connection', ctx.connection.error));
connection.on('disconnected', (ctx) => {
    if (received === sizes.length && !failed) process.exit(0);
    fail('connection', ctx.error || ctx.connection.error || {condition: 'disconnected'});
});
