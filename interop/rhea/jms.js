#!/usr/bin/env node
'use strict';
/*
 * A JMS-style client: rhea speaking AMQP 1.0 the way the Qpid JMS client (qpid-jms) does, for
 * brokers that must serve JMS applications. No Java is needed; see README.md for why.
 *
 * What is emulated (the AMQP a JMS application's calls turn into):
 *   connection  container-id = client id (else a generated connection id "ID:<uuid>:1");
 *               desired capabilities sole-connection-for-container (only with a client id),
 *               DELAYED_DELIVERY, ANONYMOUS-RELAY, SHARED-SUBS
 *   producer    link "qpid-jms:sender:<producer id>:<address>", target capability queue / topic
 *               (or no target address at all with --anonymous: the anonymous relay);
 *               messages: TextMessage body = AMQP string value, header.durable (PERSISTENT),
 *               properties.to, message-id "<producer id>-<n>", creation-time, annotations
 *               x-opt-jms-dest (byte 0 queue / 1 topic) and x-opt-jms-msg-type (byte 5, text)
 *   consumer    link "qpid-jms:receiver:<consumer id>:<address>"; source capability queue / topic;
 *               default-outcome modified{delivery-failed}; selector as filter "jms-selector",
 *               noLocal as filter "no-local"
 *   durable     createDurableSubscriber(topic, NAME): link NAME, source durable unsettled-state,
 *               expiry never, distribution-mode copy; the broker names the queue <client id>.NAME
 *   shared      createSharedDurableConsumer / createSharedConsumer: capability shared (+ global
 *               without a client id); link names NAME, NAME|2, ... (durable, client id),
 *               NAME|global, NAME|global2 (durable, no client id), NAME|volatile1, ... (non-durable),
 *               NAME|global-volatile1, ... (non-durable, no client id)
 *   unsubscribe session.unsubscribe(NAME): attach link NAME with no source, then close it
 *   refusals   as qpid-jms decides: an attach reply with a null source (consumer) or target
 *               (producer) means refused; any terminus, even an empty one, means opened, so
 *               "ready" is printed, and a detach with an error that follows closes it later
 *
 * Usage:
 *   node jms.js produce   --url URL (--queue Q | --topic T) [--count N] [--body TEXT] [--anonymous]
 *                         [--property K=V] [--cycle K=V1,V2] [--non-persistent] [--client-id ID]
 *   node jms.js consume   --url URL (--queue Q | --topic T) [--count N] [--client-id ID]
 *                         [--durable-subscription NAME | --shared-subscription NAME [--durable]]
 *                         [--consumers K] [--selector S] [--no-local] [--timeout S]
 *   node jms.js unsubscribe --url URL --name NAME [--client-id ID] [--shared]
 *
 * stdout: JSON lines as send.js / receive.js print them; consume adds "consumer": i (0-based) and
 * "link": link name to each message, prints one ready event per consumer and
 * {"event":"summary","received":N,"per_consumer":[...]} at the end.
 */
const c = require('./common.js');

const USAGE = 'usage: node jms.js produce|consume|unsubscribe --url URL ... (see the comment at the top)';
const command = process.argv[2];
if (!['produce', 'consume', 'unsubscribe'].includes(command)) c.fail(USAGE);

const args = c.parseArgs(process.argv.slice(3), {
    url: {type: 'string', default: 'amqp://127.0.0.1:5672'},
    queue: {type: 'string'},
    topic: {type: 'string'},
    count: {type: 'int', default: 1},
    body: {type: 'string', default: 'message {n}'},
    anonymous: {type: 'bool', default: false},
    property: {type: 'list'},
    cycle: {type: 'list'},
    'non-persistent': {type: 'bool', default: false},
    'client-id': {type: 'string'},
    'durable-subscription': {type: 'string'},
    'shared-subscription': {type: 'string'},
    durable: {type: 'bool', default: false},
    consumers: {type: 'int', default: 1},
    selector: {type: 'string'},
    'no-local': {type: 'bool', default: false},
    name: {type: 'string'},
    shared: {type: 'bool', default: false},
    timeout: {type: 'float', default: 30},
}, USAGE);

const connectionId = `ID:${c.rhea.generate_uuid()}:1`;
const clientId = args['client-id'];
const T = c.rhea.types;

function connect() {
    const container = c.rhea.create_container({id: clientId || connectionId});
    const desired = ['DELAYED_DELIVERY', 'ANONYMOUS-RELAY', 'SHARED-SUBS'];
    if (clientId) desired.unshift('sole-connection-for-container');
    const opts = Object.assign(c.connectOptions(args.url), {
        desired_capabilities: desired,
        properties: {product: 'hermod-interop jms.js (qpid-jms emulation)', platform: `node ${process.version}`},
    });
    const connection = container.connect(opts);
    connection.on('connection_error', (ctx) => {
        c.emit(c.errorEvent('connection', ctx.connection.error));
        process.exit(2);
    });
    connection.on('connection_close', () => process.exit(exitCode));
    connection.on('disconnected', (ctx) => {
        if (done && ctx.connection.is_closed()) return;
        c.emit(c.errorEvent('transport', ctx.error || {condition: 'disconnected', description: 'connection lost'}));
        process.exit(2);
    });
    return connection;
}

function destination() {
    if ((args.queue === undefined) === (args.topic === undefined)) c.fail('give exactly one of --queue, --topic');
    return args.queue !== undefined ? {address: args.queue, kind: 'queue', code: 0}
                                    : {address: args.topic, kind: 'topic', code: 1};
}

const OUTCOMES = ['amqp:accepted:list', 'amqp:rejected:list', 'amqp:released:list', 'amqp:modified:list'];
let done = false;
let exitCode = 0;

function produce() {
    const dest = destination();
    const tally = {sent: 0, accepted: 0, rejected: 0, released: 0, modified: 0};
    const cancel = c.deadline(args.timeout, () => tally);
    const connection = connect();
    const producerId = `${connectionId}:1:1`;
    const sender = connection.open_sender({
        name: `qpid-jms:sender:${producerId}:${args.anonymous ? 'null' : dest.address}`,
        source: {address: producerId, outcomes: OUTCOMES},
        target: args.anonymous ? {} : {address: dest.address, capabilities: [dest.kind]},
        autosettle: true,
        treat_modified_as_released: false,
    });
    const texts = new Map();
    let settled = 0;
    const finish = () => {
        done = true;
        cancel();
        c.emit(Object.assign({event: 'summary'}, tally));
        connection.close();
    };
    sender.on('sender_open', () => {
        if (!c.present(sender.target)) return; // as qpid-jms: a null target means refused
        c.emit({event: 'ready'});
        if (args.count === 0) finish();
    });
    sender.on('sendable', () => {
        while (sender.sendable() && tally.sent < args.count) {
            const n = tally.sent;
            const text = c.fill(args.body, n);
            const m = {
                body: text,
                durable: !args['non-persistent'],
                message_id: `${producerId}-${n + 1}`,
                to: dest.address,
                creation_time: new Date(),
                message_annotations: {'x-opt-jms-msg-type': T.wrap_byte(5), 'x-opt-jms-dest': T.wrap_byte(dest.code)},
            };
            const props = c.propertiesFor(n, args.property, args.cycle);
            if (props) m.application_properties = props;
            texts.set(sender.send(m).id, {n, text});
            tally.sent += 1;
        }
    });
    for (const state of ['accepted', 'rejected', 'released', 'modified']) {
        sender.on(state, (ctx) => {
            const m = texts.get(ctx.delivery.id);
            tally[state] += 1;
            settled += 1;
            if (state !== 'accepted') exitCode = 1;
            const ev = {event: 'settled', n: m.n, body: m.text, state};
            const rs = ctx.delivery.remote_state;
            if (rs && rs.error) {
                ev.condition = String(rs.error.condition);
                ev.description = String(rs.error.description || '');
            }
            c.emit(ev);
            if (settled === args.count) finish();
        });
    }
    sender.on('sender_error', (ctx) => {
        c.emit(c.errorEvent('sender', ctx.sender.error));
        process.exit(2);
    });
}

/** The link name qpid-jms gives consumer `i` (0-based) of a subscription on one connection. */
function subscriptionLinkName(name, durable, i) {
    if (durable) {
        if (clientId) return i === 0 ? name : `${name}|${i + 1}`;
        return i === 0 ? `${name}|global` : `${name}|global${i + 1}`;
    }
    return clientId ? `${name}|volatile${i + 1}` : `${name}|global-volatile${i + 1}`;
}

function consume() {
    const dest = destination();
    const durableName = args['durable-subscription'];
    const sharedName = args['shared-subscription'];
    if (durableName && sharedName) c.fail('give at most one of --durable-subscription, --shared-subscription');
    if ((durableName || sharedName) && dest.kind !== 'topic') c.fail('subscriptions are on a --topic');
    const durable = Boolean(durableName) || (Boolean(sharedName) && args.durable);
    const consumers = sharedName ? args.consumers : 1;
    const perConsumer = new Array(consumers).fill(0);
    let received = 0;
    let ready = 0;
    const cancel = c.deadline(args.timeout, () => ({received, per_consumer: perConsumer}));
    const connection = connect();
    const receivers = [];

    const finish = () => {
        if (done) return;
        done = true;
        cancel();
        c.emit({event: 'summary', received, per_consumer: perConsumer});
        for (const r of receivers) {
            if (durable) r.detach();
            else r.close();
        }
        connection.close();
    };

    for (let i = 0; i < consumers; i++) {
        const caps = [dest.kind];
        if (sharedName) {
            caps.push('shared');
            if (!clientId) caps.push('global');
        }
        const source = {
            address: dest.address,
            capabilities: caps,
            default_outcome: c.rhea.message.modified({delivery_failed: true}).described(),
            outcomes: OUTCOMES,
        };
        if (durable) {
            source.durable = 2;
            source.expiry_policy = 'never';
            source.distribution_mode = 'copy';
        } else {
            source.durable = 0;
            source.expiry_policy = 'link-detach';
        }
        const filter = {};
        if (args.selector !== undefined) Object.assign(filter, c.rhea.filter.selector(args.selector));
        if (args['no-local']) {
            filter['no-local'] = T.wrap_described(T.wrap_list([]), 'apache.org:no-local-filter:list');
        }
        if (Object.keys(filter).length) source.filter = filter;
        let name;
        if (durableName) name = durableName;
        else if (sharedName) name = subscriptionLinkName(sharedName, durable, i);
        else name = `qpid-jms:receiver:${connectionId}:1:${i + 1}:${dest.address}`;
        // each consumer on its own session, as a JMS application with one session per consumer
        const session = connection.create_session();
        session.begin();
        const r = session.open_receiver({name, source, autoaccept: false, credit_window: 0});
        receivers.push(r);
        r.on('receiver_open', (ctx) => {
            // as qpid-jms: only a null source means "refused, the detach follows"; any source
            // (even an empty one) completes createConsumer()
            if (!c.present(ctx.receiver.source)) return;
            c.emit({event: 'ready', consumer: i, link: name, source: c.terminus(ctx.receiver.source)});
            ready += 1;
            if (args.count === 0 && ready === consumers) finish();
            else if (args.count > 0) ctx.receiver.add_credit(args.count);
        });
        r.on('message', (ctx) => {
            if (done || received >= args.count) {
                ctx.delivery.release();
                return;
            }
            const ev = c.describe(ctx.message, ctx.delivery, received);
            ev.consumer = i;
            ev.link = name;
            c.emit(ev);
            ctx.delivery.accept();
            received += 1;
            perConsumer[i] += 1;
            if (received >= args.count) finish();
        });
        r.on('receiver_error', (ctx) => {
            c.emit(Object.assign(c.errorEvent('receiver', ctx.receiver.error), {consumer: i, link: name}));
            process.exit(2);
        });
    }
}

function unsubscribe() {
    if (!args.name) c.fail('unsubscribe needs --name NAME');
    const cancel = c.deadline(args.timeout, () => ({}));
    const connection = connect();
    const caps = [];
    if (args.shared) caps.push('shared');
    if (!clientId) caps.push('global');
    const opts = {name: args.name, autoaccept: false, credit_window: 0};
    if (caps.length) opts.desired_capabilities = caps;
    const r = connection.open_receiver(opts); // no source: look the subscription up by link name
    r.on('receiver_open', (ctx) => {
        if (!c.present(ctx.receiver.source)) return;
        c.emit({event: 'ready', source: c.terminus(ctx.receiver.source)});
        r.close();
    });
    r.on('receiver_close', () => {
        if (r.error) return;
        done = true;
        cancel();
        c.emit({event: 'summary', unsubscribed: args.name});
        connection.close();
    });
    r.on('receiver_error', (ctx) => {
        c.emit(c.errorEvent('receiver', ctx.receiver.error));
        process.exit(2);
    });
}

({produce, consume, unsubscribe})[command]();
