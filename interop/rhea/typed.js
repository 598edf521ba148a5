'use strict';
/*
 * The fidelity matrix's typed JSON (interop/fidelity/canon.py) as the message an application
 * builds with rhea's public typed-value API (rhea.types: wrap_uint, Ulong, Float, Array32, ...).
 *
 * Why not rhea.message.decode of the reference bytes: rhea's decoder hands out plain JavaScript
 * values (the AMQP type is lost) and its encoder picks a type from the JavaScript value again
 * (an integral number becomes uint/ulong/int/long, anything else a double). A float of
 * 3.4028234663852886e38 is integral, so rhea tries to write it as a ulong and throws RangeError:
 * the first such case (value.float.3) is where the old decode/re-encode sender stopped.
 * An application that needs an exact AMQP type has to say it with rhea.types, as done here.
 *
 * 64-bit integers and timestamps are given as 8-byte big-endian Buffers (rhea writes those as
 * they are, so no precision is lost in a JavaScript number).
 */
const { types } = require('rhea');
const messageCodec = require('rhea/lib/message.js');

const HEADER = 0x70, ANNOTATIONS = 0x72, PROPERTIES = 0x73, APP_PROPS = 0x74, DATA = 0x75,
    SEQUENCE = 0x76, VALUE = 0x77, FOOTER = 0x78;

// element constructor of an array of each type (the wide encodings: an array has one constructor)
const ARRAY_CODE = {
    null: 0x40, boolean: 0x56, ubyte: 0x50, byte: 0x51, ushort: 0x60, short: 0x61, uint: 0x70, int: 0x71,
    ulong: 0x80, long: 0x81, float: 0x72, double: 0x82, decimal32: 0x74, decimal64: 0x84, decimal128: 0x94,
    char: 0x73, timestamp: 0x83, uuid: 0x98, binary: 0xb0, string: 0xb1, symbol: 0xb3, list: 0xd0, map: 0xd1,
    array: 0xf0,
};

function int64(text, signed) {
    const buf = Buffer.alloc(8);
    if (signed) buf.writeBigInt64BE(BigInt(text)); else buf.writeBigUInt64BE(BigInt(text));
    return buf;
}

const hex = (s) => Buffer.from(s, 'hex');
const uuidBytes = (s) => hex(s.replace(/-/g, ''));

/** One typed-JSON value as a rhea Typed value. */
function typed(value) {
    const [kind, v] = Object.entries(value)[0];
    switch (kind) {
    case 'null': return types.Null();
    case 'boolean': return types.wrap_boolean(v);
    case 'ubyte': return types.Ubyte(v);
    case 'byte': return types.Byte(v);
    case 'ushort': return types.Ushort(v);
    case 'short': return types.Short(v);
    case 'uint': return types.wrap_uint(v);
    case 'int': return types.wrap_int(v);
    case 'ulong': return types.wrap_ulong(int64(v, false));
    case 'long': return types.wrap_long(int64(v, true));
    case 'timestamp': return types.Timestamp(int64(v, true));
    case 'float': return types.Float(hex(v).readFloatBE(0));
    case 'double': return types.Double(hex(v).readDoubleBE(0));
    case 'decimal32': return types.Decimal32(hex(v));
    case 'decimal64': return types.Decimal64(hex(v));
    case 'decimal128': return types.Decimal128(hex(v));
    case 'char': return types.wrap_char(v);
    case 'uuid': return types.Uuid(uuidBytes(v));
    case 'binary': return types.wrap_binary(hex(v));
    case 'string': return types.wrap_string(v);
    case 'symbol': return types.wrap_symbol(v);
    case 'list': return v.length ? types.List32(v.map(typed)) : types.List0();
    case 'map': return types.Map32(v.flatMap(([k, x]) => [typed(k), typed(x)]));
    case 'described': return types.described(typed(v[0]), typed(v[1]));
    case 'array': {
        const code = ARRAY_CODE[v.type];
        if (code === undefined) throw new TypeError('no array constructor for ' + v.type);
        const descriptor = v.descriptor === undefined ? undefined : typed(v.descriptor);
        return types.Array32(v.items.map(element), code, descriptor);
    }
    default: throw new TypeError('unknown type ' + kind);
    }
}

/** An array element: the value alone, as rhea's writer takes it after the array's one constructor. */
function element(value) {
    const [kind, v] = Object.entries(value)[0];
    if (kind === 'boolean') return v ? 1 : 0;
    if (kind === 'list') return v.map(typed);
    if (kind === 'map') return v.flatMap(([k, x]) => [typed(k), typed(x)]);
    if (kind === 'array') {
        // rhea's writer passes no element constructor to an array nested in an array
        throw new TypeError('rhea cannot encode an array of arrays');
    }
    return typed(value).value;
}

const PROPERTY_FIELDS = ['message_id', 'user_id', 'to', 'subject', 'reply_to', 'correlation_id', 'content_type',
    'content_encoding', 'absolute_expiry_time', 'creation_time', 'group_id', 'group_sequence', 'reply_to_group_id'];
const HEADER_FIELDS = ['durable', 'priority', 'ttl', 'first_acquirer', 'delivery_count'];

/** A composite field as the plain value rhea's field wrapper (wrap_<type>) takes. */
function fieldValue(value) {
    const [kind, v] = Object.entries(value)[0];
    switch (kind) {
    case 'null': return undefined;
    case 'binary': return hex(v);
    case 'timestamp': return int64(v, true);
    default: return v;
    }
}

// message-id and correlation-id: rhea's wrap_message_id reads a Buffer as a uuid and a number as
// a ulong, so the id goes in as a Typed value (which it takes as it is) to keep binary ids binary.
const ID_FIELDS = new Set([0, 5]);

/** The string-keyed map sections (application-properties, footer) as rhea objects of Typed values. */
function objectOf(map) {
    const out = {};
    for (const [k, v] of map) out[Object.values(k)[0]] = typed(v);
    return out;
}

/** `[[section code, typed JSON], ...]` as a rhea message object. */
function messageOf(sections) {
    const msg = {};
    const data = [], sequences = [];
    for (const [code, value] of sections) {
        if (code === HEADER || code === PROPERTIES) {
            const names = code === HEADER ? HEADER_FIELDS : PROPERTY_FIELDS;
            value.list.forEach((field, i) => {
                const v = code === PROPERTIES && ID_FIELDS.has(i) && !('null' in field) ? typed(field) : fieldValue(field);
                if (v !== undefined) msg[names[i]] = v;
            });
        } else if (code === ANNOTATIONS) {
            msg.message_annotations = objectOf(value.map);
        } else if (code === APP_PROPS) {
            msg.application_properties = objectOf(value.map);
        } else if (code === DATA) {
            data.push(hex(value.binary));
        } else if (code === SEQUENCE) {
            sequences.push(typed(value));
        } else if (code === VALUE) {
            msg.body = typed(value);
        } else if (code === FOOTER) {
            msg.footer = objectOf(value.map);
        } else {
            throw new TypeError('unsupported section 0x' + code.toString(16));
        }
    }
    if (data.length) msg.body = data.length === 1 ? messageCodec.data_section(data[0]) : messageCodec.data_sections(data);
    if (sequences.length) {
        msg.body = sequences.length === 1 ? messageCodec.sequence_section(sequences[0])
            : messageCodec.sequence_sections(sequences);
    }
    return msg;
}

module.exports = { typed, messageOf };
