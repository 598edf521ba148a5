#!/usr/bin/env node
'use strict';
/*
 * Send COUNT messages to an address and wait for the broker's outcome of each.
 *
 * stdout, one JSON object per line:
 *   {"event":"ready"}                                  the sender link is attached
 *   {"event":"settled","n":0,"body":"message 0","state":"accepted"}   per message
 *   {"event":"summary","sent":N,"accepted":N,"rejected":0,"released":0,"modified":0}
 *   {"event":"error","where":"sender","condition":"amqp:not-found","description":"..."}
 * Exit status: 0 all accepted, 1 some other outcome, 2 error, 3 timed out, 64 bad usage.
 */
const c = require('./common.js');

const USAGE = `usage: node send.js --url amqp://HOST:PORT --address ADDRESS [options]
  --count N              messages to send (default 1)
  --body TEXT            body template, {n} = message index (default "message {n}")
  --binary               send the body as a data section (UTF-8 bytes) instead of a string value
  --capability CAP       target capability: queue, topic (repeatable or comma-separated)
  --property KEY=VALUE   application property, {n} allowed; integers and true/false are typed (repeatable)
  --cycle KEY=V1,V2,...  application property taking V1, V2, ... in turn (repeatable)
  --subject TEXT         properties.subject
  --durable              header.durable = true
  --anonymous            attach with no target address; each message's "to" is ADDRESS
  --container-id ID      the connection's container id
  --link-name NAME       the sender link's name
  --timeout SECONDS      give up after this long (default 30)`;

const args = c.parseArgs(process.argv.slice(2), {
    url: {type: 'string', default: 'amqp://127.0.0.1:5672'},
    address: {type: 'string'},
    count: {type: 'int', default: 1},
    body: {type: 'string', default: 'message {n}'},
    binary: {type: 'bool', default: false},
    capability: {type: 'list'},
    property: {type: 'list'},
    cycle: {type: 'list'},
    subject: {type: 'string'},
    durable: {type: 'bool', default: false},
    anonymous: {type: 'bool', default: false},
    'container-id': {type: 'string'},
    'link-name': {type: 'string'},
    timeout: {type: 'float', default: 30},
}, USAGE);
if (!args.address) c.fail(USAGE);

const tally = {sent: 0, accepted: 0, rejected: 0, released: 0, modified: 0};
const cancel = c.deadline(args.timeout, () => tally);
let settled = 0;
let failed = false;

const container = c.rhea.create_container(args['container-id'] ? {id: args['container-id']} : {});
const connection = container.connect(c.connectOptions(args.url));

const target = args.anonymous ? {} : {address: args.address};
const caps = c.capabilityList(args.capability);
if (caps.length) target.capabilities = caps;
const senderOptions = {target: target, autosettle: true, treat_modified_as_released: false};
if (args['link-name']) senderOptions.name = args['link-name'];
const sender = connection.open_sender(senderOptions);

function message(n) {
    const text = c.fill(args.body, n);
    const m = {body: args.binary ? c.rhea.message.data_section(Buffer.from(text, 'utf8')) : text};
    const props = c.propertiesFor(n, args.property, args.cycle);
    if (props) m.application_properties = props;
    if (args.subject) m.subject = c.fill(args.subject, n);
    if (args.durable) m.durable = true;
    if (args.anonymous) m.to = args.address;
    m.message_id = `rhea-${process.pid}-${n}`;
    return {message: m, text: text};
}

const bodies = new Map();

function finish() {
    cancel();
    c.emit(Object.assign({event: 'summary'}, tally));
    connection.close();
}

function outcome(name, context) {
    const n = bodies.get(context.delivery.id);
    tally[name] += 1;
    settled += 1;
    const ev = {event: 'settled', n: n.n, body: n.text, state: name};
    const state = context.delivery.remote_state;
    if (state && state.error) {
        ev.condition = String(state.error.condition);
        ev.description = String(state.error.description || '');
    }
    c.emit(ev);
    if (name !== 'accepted') failed = true;
    if (settled === args.count) finish();
}

sender.on('sender_open', () => {
    // A refused attach is answered with no target (or an empty one), then a detach with the error.
    if (!args.anonymous && !(c.present(sender.target) && sender.target.address)) return;
    c.emit({event: 'ready'});
    if (args.count === 0) finish();
});
sender.on('sendable', () => {
    while (sender.sendable() && tally.sent < args.count) {
        const n = tally.sent;
        const m = message(n);
        const delivery = sender.send(m.message);
        bodies.set(delivery.id, {n: n, text: m.text});
        tally.sent += 1;
    }
});
sender.on('accepted', (ctx) => outcome('accepted', ctx));
sender.on('rejected', (ctx) => outcome('rejected', ctx));
sender.on('released', (ctx) => outcome('released', ctx));
sender.on('modified', (ctx) => outcome('modified', ctx));
sender.on('sender_error', (ctx) => {
    c.emit(c.errorEvent('sender', ctx.sender.error));
    process.exit(2);
});
connection.on('connection_error', (ctx) => {
    c.emit(c.errorEvent('connection', ctx.connection.error));
    process.exit(2);
});
connection.on('disconnected', (ctx) => {
    if (ctx.connection.is_closed() && settled === args.count) return;
    c.emit(c.errorEvent('transport', ctx.error || {condition: 'disconnected', description: 'connection lost'}));
    process.exit(2);
});
connection.on('connection_close', () => {
    process.exit(failed ? 1 : 0);
});
