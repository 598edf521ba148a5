#!/usr/bin/env node
'use strict';
/*
 * Receive exactly COUNT messages from an address (a queue, a topic subscription, a durable
 * subscription), accepting each one, then leave.
 *
 * stdout, one JSON object per line:
 *   {"event":"ready","source":{...}}                   the broker has attached the link; for a
 *                                                      topic the subscription exists from here on
 *   {"event":"message","n":0,"body":"message 0","properties":{...},"annotations":{...},...}
 *   {"event":"summary","received":N}
 *   {"event":"error","where":"receiver","condition":"amqp:invalid-field","description":"..."}
 * Exit status: 0 done, 2 error, 3 timed out before COUNT messages, 64 bad usage.
 *
 * The receiver grants exactly COUNT credits, so it never takes more than it prints.
 */
const c = require('./common.js');

const USAGE = `usage: node receive.js --url amqp://HOST:PORT --address ADDRESS [options]
  --count N              messages to take (default 1); 0 = attach, print ready, leave
  --capability CAP       source capability: queue, topic, shared, global (repeatable or comma-separated)
  --selector TEXT        JMS selector (filter jms-selector, descriptor apache.org:selector-filter:string)
  --durable NAME         durable subscription NAME: link name NAME, source durable unsettled-state,
                         expiry never. Leaving detaches (the subscription stays) unless --unsubscribe
  --unsubscribe          leave by closing the link (for a durable subscription: delete it)
  --no-source            attach with no source: look up the durable subscription named by --durable
  --browse               distribution-mode copy (look without taking)
  --client-id ID         the connection's container id (durable subscriptions are named ID.NAME)
  --link-name NAME       the receiver link's name (default: --durable NAME, else random)
  --release              release every message instead of accepting it
  --timeout SECONDS      give up after this long (default 30)`;

const args = c.parseArgs(process.argv.slice(2), {
    url: {type: 'string', default: 'amqp://127.0.0.1:5672'},
    address: {type: 'string'},
    count: {type: 'int', default: 1},
    capability: {type: 'list'},
    selector: {type: 'string'},
    durable: {type: 'string'},
    unsubscribe: {type: 'bool', default: false},
    'no-source': {type: 'bool', default: false},
    browse: {type: 'bool', default: false},
    'client-id': {type: 'string'},
    'link-name': {type: 'string'},
    release: {type: 'bool', default: false},
    timeout: {type: 'float', default: 30},
}, USAGE);
if (!args.address && !args['no-source']) c.fail(USAGE);
if (args['no-source'] && !args.durable && !args['link-name']) c.fail('--no-source needs --durable NAME');

let received = 0;
let leaving = false;
const cancel = c.deadline(args.timeout, () => ({received}));

const container = c.rhea.create_container(args['client-id'] !== undefined ? {id: args['client-id']} : {});
const connection = container.connect(c.connectOptions(args.url));

const caps = c.capabilityList(args.capability);
const options = {autoaccept: false, credit_window: 0};
if (!args['no-source']) {
    const source = {address: args.address};
    if (caps.length) source.capabilities = caps;
    if (args.selector !== undefined) source.filter = c.rhea.filter.selector(args.selector);
    if (args.durable) {
        source.durable = 2; // unsettled-state
        source.expiry_policy = 'never';
    }
    if (args.browse) source.distribution_mode = 'copy';
    options.source = source;
} else if (caps.length) {
    options.desired_capabilities = caps;
}
options.name = args['link-name'] || args.durable;
const receiver = connection.open_receiver(options);

function leave() {
    if (leaving) return;
    leaving = true;
    cancel();
    c.emit({event: 'summary', received: received});
    if (args.durable && !args.unsubscribe) receiver.detach();
    else receiver.close();
    connection.close();
}

receiver.on('receiver_open', (ctx) => {
    // A refused attach is answered with no source (or an empty one), then a detach with the error.
    if (!c.present(ctx.receiver.source) || !ctx.receiver.source.address) return;
    c.emit({event: 'ready', source: c.terminus(ctx.receiver.source)});
    if (args.count === 0) leave();
    else ctx.receiver.add_credit(args.count);
});
receiver.on('message', (ctx) => {
    if (leaving) return;
    c.emit(c.describe(ctx.message, ctx.delivery, received));
    if (args.release) ctx.delivery.release();
    else ctx.delivery.accept();
    received += 1;
    if (received >= args.count) leave();
});
receiver.on('receiver_error', (ctx) => {
    c.emit(c.errorEvent('receiver', ctx.receiver.error));
    process.exit(2);
});
receiver.on('receiver_close', () => {
    if (!leaving) {
        c.emit({event: 'error', where: 'receiver', condition: 'detached', description: 'the broker detached the link'});
        process.exit(2);
    }
});
connection.on('connection_error', (ctx) => {
    c.emit(c.errorEvent('connection', ctx.connection.error));
    process.exit(2);
});
connection.on('disconnected', (ctx) => {
    if (leaving && ctx.connection.is_closed()) return;
    c.emit(c.errorEvent('transport', ctx.error || {condition: 'disconnected', description: 'connection lost'}));
    process.exit(2);
});
connection.on('connection_close', () => process.exit(0));
