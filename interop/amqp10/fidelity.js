'use strict';
/*
 * The `amqp10` npm client (node-amqp10 3.6.0) in the fidelity matrix (tests/interop/test_fidelity_matrix.py).
 *
 *   node fidelity.js send    --url URL --address A --spec SPEC.jsonl --sent SENT.bin
 *   node fidelity.js receive --url URL --address A --count N --output OUT.bin
 *
 * Files hold messages as a 4-byte big-endian length, then the encoded message.
 * send: each line of SPEC is {"n": i, "sections": [[code, typed JSON], ...]} (interop/fidelity/canon.py);
 * the message is built with amqp10's own typed API (amqp10.Type.uint(...) etc., DescribedType for
 * the body section) and sent with sender.send(); the bytes amqp10's encoder makes of it (what goes
 * on the wire) are appended to SENT. What amqp10 cannot express (see typed.js) is reported as
 * {"event":"unsendable","n":i,"reason":...}, not sent, and the run exits 1.
 * receive: grants N credits; the raw payload of each delivery (as amqp10 hands it to its message
 * decoder) is appended to OUT; amqp10 settles it accepted (its auto-settle receiver mode).
 * Output: JSON lines like the other interop clients. Exit: 0 done, 1 not all sent / accepted,
 * 2 an AMQP or connection error, 3 timeout, 64 bad usage.
 */
const fs = require('fs');
const amqp10 = require('amqp10');
const messageCodec = require('amqp10/lib/types/message');
const Builder = require('buffer-builder');
const { messageOf } = require('./typed');

const USAGE = 'usage: node fidelity.js send|receive --url URL --address A [--spec SPEC --sent SENT | --count N --output OUT] [--timeout S]';

function parseArgs(argv) {
    const out = { timeout: 60, count: 0 };
    for (let i = 0; i < argv.length; i += 2) {
        const key = argv[i].replace(/^--/, '');
        if (!['url', 'address', 'spec', 'sent', 'count', 'output', 'timeout'].includes(key) || i + 1 >= argv.length) {
            process.stderr.write(USAGE + '\n');
            process.exit(64);
        }
        out[key] = ['count', 'timeout'].includes(key) ? Number(argv[i + 1]) : argv[i + 1];
    }
    return out;
}

const emit = (event) => process.stdout.write(JSON.stringify(event) + '\n');

function frame(buf) {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(buf.length);
    return Buffer.concat([len, buf]);
}

const mode = process.argv[2];
if (mode !== 'send' && mode !== 'receive') {
    process.stderr.write(USAGE + '\n');
    process.exit(64);
}
const args = parseArgs(process.argv.slice(3));
if (!args.url || !args.address) {
    process.stderr.write(USAGE + '\n');
    process.exit(64);
}

const timer = setTimeout(() => {
    emit({ event: 'timeout', seconds: args.timeout });
    process.exit(3);
}, args.timeout * 1000);

const policy = amqp10.Policy.merge({
    connect: { saslMechanism: 'ANONYMOUS' },
    reconnect: { retries: 0, forever: false },
    senderLink: { attach: { maxMessageSize: 0 } },
    receiverLink: {
        // no size limit (amqp10's default is 10000 bytes), exactly --count credits, never refreshed
        attach: { maxMessageSize: 0 },
        creditQuantum: Math.max(args.count, 1),
        credit: (link, options) => { if (options && options.initial) link.addCredits(link.policy.creditQuantum); },
    },
}, amqp10.Policy.DefaultPolicy);
const client = new amqp10.Client(policy);

function fail(where, err) {
    emit({ event: 'error', where, condition: err && err.condition ? String(err.condition) : undefined,
        description: String(err && (err.description || err.message) || err) });
    process.exit(2);
}
client.on('client:errorReceived', (err) => fail('client', err));
client.on('connection:closed', () => { /* an orderly close after disconnect() */ });

async function send() {
    const specs = fs.readFileSync(args.spec, 'utf8').split('\n').filter((line) => line).map((line) => JSON.parse(line));
    const sentFd = fs.openSync(args.sent, 'w');
    const sender = await client.createSender(args.address);
    sender.on('errorReceived', (err) => fail('sender', err));
    let rc = 0, sent = 0;
    const settles = [];
    for (const { n, sections } of specs) {
        let message, bytes;
        try {
            message = messageOf(sections);
            const builder = new Builder();
            messageCodec.encodeMessage(message, builder);
            bytes = builder.get();
        } catch (err) {
            emit({ event: 'unsendable', n, reason: String(err && err.message || err) });
            rc = 1;
            continue;
        }
        fs.writeSync(sentFd, frame(bytes));
        settles.push(sender.send(message).then((state) => {
            const name = state && state.constructor ? state.constructor.name.toLowerCase() : String(state);
            emit({ event: 'settled', n, state: name });
            if (name !== 'accepted') rc = 1;
        }));
        sent++;
        emit({ event: 'sent', n });
    }
    fs.closeSync(sentFd);
    await Promise.all(settles);
    emit({ event: 'summary', sent, unsendable: specs.length - sent });
    return rc;
}

async function receive() {
    // amqp10 decodes each complete delivery with decodeMessage(payload): keep those bytes as they are
    let raw = null;
    const decode = messageCodec.decodeMessage;
    messageCodec.decodeMessage = (payload) => {
        raw = Buffer.isBuffer(payload) ? Buffer.from(payload) : payload.slice();
        try {
            return decode(payload);
        } catch (err) {
            // amqp10 would throw out of its frame handler and stop; the bytes still count
            emit({ event: 'undecodable', n: got, reason: String(err && err.message || err) });
            return {};
        }
    };
    const outFd = fs.openSync(args.output, 'w');
    let got = 0;
    const receiver = await client.createReceiver(args.address);
    receiver.on('errorReceived', (err) => fail('receiver', err));
    await new Promise((resolve) => {
        if (args.count === 0) resolve();
        receiver.on('message', () => {
            fs.writeSync(outFd, frame(raw));
            emit({ event: 'message', n: got, size: raw.length, raw: true });
            if (++got === args.count) resolve();
        });
    });
    fs.closeSync(outFd);
    emit({ event: 'summary', received: got });
    return 0;
}

client.connect(args.url)
    .then(() => (mode === 'send' ? send() : receive()))
    .then(async (rc) => {
        await client.disconnect();
        clearTimeout(timer);
        process.exit(rc);
    })
    .catch((err) => fail(mode === 'send' ? 'sender' : 'receiver', err));
