'use strict';
/*
 * The rhea client of the fidelity matrix (tests/interop/test_fidelity_matrix.py).
 *
 *   node fidelity.js send    --url URL --address A --input IN.bin --sent SENT.bin
 *   node fidelity.js receive --url URL --address A --count N --output OUT.bin
 *
 * Files hold messages as a 4-byte big-endian length, then the encoded message.
 * send: each message of IN is decoded with rhea's codec (rhea.message.decode) into the message
 * object an application would have, and sent with sender.send(); what rhea.message.encode gives
 * for that object (what rhea puts on the wire) is appended to SENT.
 * receive: grants N credits; the raw bytes of each delivery (taken as rhea hands them to its
 * decoder) are appended to OUT, and the message is accepted.
 * Output: JSON lines like the other interop clients. Exit: 0 done, 1 not accepted, 2 error, 3 timeout.
 */
const fs = require('fs');
const { rhea, parseArgs, emit, connectOptions, errorEvent } = require('./common');
const codec = require('rhea/lib/message.js');

const USAGE = 'usage: node fidelity.js send|receive --url URL --address A [--input IN --sent SENT | --count N --output OUT]';
const mode = process.argv[2];
if (mode !== 'send' && mode !== 'receive') {
    process.stderr.write(USAGE + '\n');
    process.exit(64);
}
const args = parseArgs(process.argv.slice(3), {
    url: { type: 'string' }, address: { type: 'string' }, input: { type: 'string' }, sent: { type: 'string' },
    count: { type: 'int', default: 0 }, output: { type: 'string' }, timeout: { type: 'float', default: 60 },
}, USAGE);

function frame(buf) {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(buf.length);
    return Buffer.concat([len, buf]);
}

function readFrames(path) {
    const data = fs.readFileSync(path);
    const out = [];
    for (let pos = 0; pos + 4 <= data.length;) {
        const n = data.readUInt32BE(pos);
        out.push(data.subarray(pos + 4, pos + 4 + n));
        pos += 4 + n;
    }
    return out;
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
    const messages = readFrames(args.input);
    const sentFd = fs.openSync(args.sent, 'w');
    let next = 0;
    let settled = 0;
    const sender = connection.open_sender({ target: { address: args.address }, autosettle: true });
    const pump = () => {
        while (sender.sendable() && next < messages.length) {
            const message = codec.decode(messages[next]);
            fs.writeSync(sentFd, frame(codec.encode(message)));
            sender.send(message, String(next));
            emit({ event: 'sent', n: next });
            next++;
        }
        if (next === messages.length) fs.closeSync(sentFd);
    };
    sender.on('sendable', pump);
    const outcome = (state) => () => {
        emit({ event: 'settled', state });
        if (state !== 'accepted') rc = 1;
        if (++settled === messages.length) {
            emit({ event: 'summary', sent: settled });
            connection.close();
        }
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
