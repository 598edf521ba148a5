'use strict';
/*
 * Helpers shared by the rhea clients: a small argument parser, one-JSON-object-per-line output,
 * and conversion of decoded AMQP values into plain JSON.
 *
 * Output contract (read by tests/interop): every line on stdout is one JSON object with an
 * "event" field. Diagnostics go to stderr.
 */

const rhea = require('rhea');

/**
 * Parse `--name value` / `--flag` arguments.
 * spec: {name: {type: 'string'|'int'|'bool'|'list', default}}; 'list' options may repeat.
 */
function parseArgs(argv, spec, usage) {
    const out = {};
    for (const [name, s] of Object.entries(spec)) {
        out[name] = s.type === 'list' ? [] : s.default;
    }
    for (let i = 0; i < argv.length; i++) {
        const arg = argv[i];
        if (arg === '--help' || arg === '-h') {
            process.stdout.write(usage + '\n');
            process.exit(0);
        }
        if (!arg.startsWith('--')) fail(`unexpected argument ${arg}\n${usage}`);
        let name = arg.slice(2);
        let value;
        const eq = name.indexOf('=');
        if (eq >= 0) {
            value = name.slice(eq + 1);
            name = name.slice(0, eq);
        }
        const s = spec[name];
        if (!s) fail(`unknown option --${name}\n${usage}`);
        if (s.type === 'bool') {
            out[name] = value === undefined ? true : !['0', 'false', 'no'].includes(value);
            continue;
        }
        if (value === undefined) {
            if (i + 1 >= argv.length) fail(`--${name} needs a value`);
            value = argv[++i];
        }
        if (s.type === 'int') {
            const n = Number(value);
            if (!Number.isInteger(n)) fail(`--${name} needs an integer, got ${value}`);
            out[name] = n;
        } else if (s.type === 'float') {
            const n = Number(value);
            if (Number.isNaN(n)) fail(`--${name} needs a number, got ${value}`);
            out[name] = n;
        } else if (s.type === 'list') {
            out[name].push(value);
        } else {
            out[name] = value;
        }
    }
    return out;
}

function fail(message) {
    process.stderr.write(message + '\n');
    process.exit(64);
}

function emit(obj) {
    process.stdout.write(JSON.stringify(obj) + '\n');
}

/** amqp://[user:pass@]host:port -> rhea connect options. */
function connectOptions(url) {
    let u;
    try {
        u = new URL(url);
    } catch (e) {
        fail(`bad url ${url}: ${e.message}`);
    }
    if (u.protocol !== 'amqp:' && u.protocol !== 'amqps:') fail(`only amqp:// and amqps:// urls are supported, got ${url}`);
    const tls = u.protocol === 'amqps:';
    const opts = {
        host: u.hostname.replace(/^\[|\]$/g, ''),
        port: u.port ? Number(u.port) : (tls ? 5671 : 5672),
        reconnect: false,
        idle_time_out: 30000,
    };
    if (tls) {
        // amqps: TLS, the server verified against the CA file in HERMOD_CA (or the system's).
        opts.transport = 'tls';
        if (process.env.HERMOD_CA) opts.ca = [require('fs').readFileSync(process.env.HERMOD_CA)];
    }
    if (u.username) {
        opts.username = decodeURIComponent(u.username);
        opts.password = decodeURIComponent(u.password);
    }
    return opts;
}

/** Split repeated / comma-separated capability options into one list of symbols. */
function capabilityList(values) {
    const out = [];
    for (const v of values || []) {
        for (const c of v.split(',')) {
            if (c) out.push(c);
        }
    }
    return out;
}

/** `{n}` in a template becomes the message index (0-based). */
function fill(template, n) {
    return String(template).split('{n}').join(String(n));
}

/**
 * A property value from the command line: integers and true/false become typed values,
 * anything else a string.
 */
function typedValue(text) {
    if (/^-?\d+$/.test(text)) {
        const n = Number(text);
        return Number.isSafeInteger(n) ? rhea.types.wrap_long(n) : text;
    }
    if (/^-?\d+\.\d+$/.test(text)) return rhea.types.wrap_double(Number(text));
    if (text === 'true') return true;
    if (text === 'false') return false;
    return text;
}

/** key=value options (value may hold {n}) plus key=v1,v2,... cycles -> application properties for message n. */
function propertiesFor(n, props, cycles) {
    const out = {};
    for (const p of props || []) {
        const eq = p.indexOf('=');
        if (eq <= 0) fail(`--property needs key=value, got ${p}`);
        out[p.slice(0, eq)] = typedValue(fill(p.slice(eq + 1), n));
    }
    for (const c of cycles || []) {
        const eq = c.indexOf('=');
        if (eq <= 0) fail(`--cycle needs key=v1,v2,..., got ${c}`);
        const values = c.slice(eq + 1).split(',');
        out[c.slice(0, eq)] = typedValue(values[n % values.length]);
    }
    return Object.keys(out).length ? out : undefined;
}

/** A decoded AMQP value as plain JSON (binary as {"binary": base64}, timestamps as epoch ms). */
function plain(value) {
    if (value === null || value === undefined) return null;
    if (Buffer.isBuffer(value)) return {binary: value.toString('base64')};
    if (value instanceof Date) return value.getTime();
    if (typeof value === 'bigint') return Number(value);
    if (Array.isArray(value)) return value.map(plain);
    if (typeof value === 'object') {
        if (value.type && value.type.typecode !== undefined && 'value' in value) return plain(value.value);
        if (value.descriptor !== undefined && value.value !== undefined) {
            return {descriptor: plain(value.descriptor), value: plain(value.value)};
        }
        const out = {};
        for (const [k, v] of Object.entries(value)) out[k] = plain(v);
        return out;
    }
    return value;
}

/** Body of a received message: an AMQP value as JSON, a data section as {"binary": base64}. */
function bodyOf(message) {
    let body = message.body;
    if (body && body.typecode === 0x75) body = body.content; // data section
    if (body && body.typecode === 0x76) body = body.content; // amqp-sequence
    return plain(body);
}

/** The fields of a received message a test may look at. */
function describe(message, delivery, n) {
    const out = {event: 'message', n: n, body: bodyOf(message)};
    for (const f of ['message_id', 'to', 'subject', 'reply_to', 'correlation_id', 'content_type',
                     'group_id', 'durable', 'priority', 'delivery_count', 'ttl', 'creation_time']) {
        if (message[f] !== undefined && message[f] !== null) out[f] = plain(message[f]);
    }
    if (message.application_properties) out.properties = plain(message.application_properties);
    if (message.message_annotations) out.annotations = plain(message.message_annotations);
    return out;
}

/** False for a missing field and for an AMQP null (rhea decodes some nulls as a typed null). */
function present(v) {
    return v !== null && v !== undefined && !(v.type && v.type.typecode === 0x40);
}

/** A terminus (source or target) from an attach as JSON with its field names. */
function terminus(t) {
    if (!present(t)) return null;
    const out = {};
    for (const f of ['address', 'durable', 'expiry_policy', 'timeout', 'dynamic', 'distribution_mode',
                     'filter', 'default_outcome', 'outcomes', 'capabilities']) {
        const v = t[f];
        if (v !== undefined && v !== null) out[f] = plain(v);
    }
    return out;
}

/** An AMQP error (from a link, session or connection) as JSON. */
function errorEvent(where, error) {
    return {
        event: 'error',
        where: where,
        condition: error ? String(error.condition || error.name || 'error') : 'error',
        description: error ? String(error.description || error.message || '') : '',
    };
}

/**
 * Bound a client's run: after `seconds` print a timeout event plus the caller's summary and exit 3.
 * Returns a function that cancels the bound.
 */
function deadline(seconds, summary) {
    if (!seconds || seconds <= 0) return () => {};
    const t = setTimeout(() => {
        emit({event: 'timeout', seconds: seconds});
        emit(Object.assign({event: 'summary', timed_out: true}, summary()));
        process.exit(3);
    }, seconds * 1000);
    return () => clearTimeout(t);
}

module.exports = {
    rhea, parseArgs, fail, emit, connectOptions, capabilityList, fill, typedValue, propertiesFor,
    plain, bodyOf, describe, present, terminus, errorEvent, deadline,
};
