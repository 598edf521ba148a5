'use strict';
/*
 * The rhea client of the fidelity matrix (tests/interop/test_fidelity_matrix.py).
 *
 *   node fidelity.js send    --url URL --address A --spec SPEC.jsonl --sent SENT.bin
 *   node fidelity.js receive --url URL --address A --count N --output OUT.bin
 *
 * Files hold messages as a 4-byte big-endian length, then the encoded message.
 * send: each line of SPEC is {"n": i, "sections": [[code, typed JSON], ...]} (interop/fidelity/canon.py);
 * the message is built with rhea's typed-value API (typed.js) and sent with sender.send(); what
 * rhea.message.encode gives for it (what rhea puts on the wire) is appended to SENT. A message rhea
 * cannot encode is reported ({"event":"unsendable","n":i,"reason":...}), not sent, and the run exits 1.
 * receive: grants N credits; the raw bytes of each delivery (taken as rhea hands them to its
 * decoder) are appended to OUT, and the message is accepted.
 * Output: JSON lines like the other interop clients. Exit: 0 done, 1 not accepted, 2 error, 3 timeout.
 */
const fs = require('fs');
const { rhea, parseArgs, emit, connectOptions, errorEvent } = require('./common');
const codec = require('rhea/lib/message.js');
const { messageOf } = require('./typed');

const USAGE = 'usage: node fidelity.js send|receive --url URL --address A [--spec SPEC --sent SENT | --count N --output OUT]';
const mode = process.argv[2];
if (mode !== 'send' && mode !== 'receive') {
    process.stderr.write(USAGE + '\n');
    process.exit(64);
}
const args = parseArgs(process.argv.slice(3), {
    url: { type: 'string' }, address: { type: 'string' }, spec: { type: 'string' }, sent: { type: 'string' },
    count: { type: 'int', default: 0 }, output: { type: 'string' }, timeout: { type: 'float', default: 60 },
}, USAGE);

function frame(buf) {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(buf.length);
    return Buffer.concat([len, buf]);
}

let rc = 0;
const timer = setTimeout(() => {
    emit({ event: 'timeout', seconds: args.timeout });
    process.exit(3);
}, args.timeout * 1000);
const container = rhea.create_container();
const connection = container.connect(connectOptions(args.url));
connection.on('connection_error', (ctx) => { emit(errorEvent('connection', ctx.connection.error)); rc = 2; });
connection.on('disconnected', (ctx) => {
    if (ctx.error) { emit({ event: 'error', where: 'transport', description: String(ctx.error) }); process.exit(2); }
});
connection.on('connection_close', () => { clearTimeout(timer); process.exitCode = rc; });

if (mode === 'send') {
    const specs = fs.readFileSync(args.spec, 'utf8').split('\n').filter((line) => line).map((line) => JSON.parse(line));
    let sentFd = fs.openSync(args.sent, 'w');
    let next = 0;
    let sentCount = 0;
    let settled = 0;
    const sender = connection.open_sender({ target: { address: args.address }, autosettle: true });
    let finished = false;
    const finishIfDone = () => {
        if (!finished && sentFd === null && settled === sentCount) {
            finished = true;
            emit({ event: 'summary', sent: sentCount, unsendable: specs.length - sentCount });
            connection.close();
        }
    };
    const pump = () => {
        while (sender.sendable() && next < specs.length) {
            const { n, sections } = specs[next++];
            let message, bytes;
            try {
                message = messageOf(sections);
                bytes = codec.encode(message);
            } catch (err) {
                emit({ event: 'unsendable', n, reason: String(err) });
                rc = 1;
                continue;
            }
            fs.writeSync(sentFd, frame(bytes));
            sender.send(message, String(n));
            sentCount++;
            emit({ event: 'sent', n });
        }
        if (next === specs.length && sentFd !== null) {
            fs.closeSync(sentFd);
            sentFd = null;
            finishIfDone();
        }
    };
    sender.on('sendable', pump);
    const outcome = (state) => () => {
        emit({ event: 'settled', state });
        if (state !== 'accepted') rc = 1;
        settled++;
        finishIfDone();
    };
    sender.on('accepted', outcome('accepted'));
    sender.on('rejected', outcome('rejected'));
    sender.on('released', outcome('released'));
    sender.on('modified', outcome('modified'));
    sender.on('sender_error', (ctx) => { emit(errorEvent('sender', ctx.sender.error)); rc = 2; connection.close(); });
} else {
    // rhea decodes each complete delivery with message.decode(bytes): keep those bytes as they are
    let raw = null;
    const decode = codec.decode;
    codec.decode = (buf) => { raw = Buffer.from(buf); return decode(buf); };
    const outFd = fs.openSync(args.output, 'w');
    let got = 0;
    const receiver = connection.open_receiver({ source: { address: args.address }, credit_window: 0, autoaccept: true });
    receiver.add_credit(args.count);
    receiver.on('message', () => {
        fs.writeSync(outFd, frame(raw));
        emit({ event: 'message', n: got, size: raw.length, raw: true });
        if (++got === args.count) {
            fs.closeSync(outFd);
            emit({ event: 'summary', received: got });
            connection.close();
        }
    });
    receiver.on('receiver_error', (ctx) => { emit(errorEvent('receiver', ctx.receiver.error)); rc = 2; connection.close(); });
}
