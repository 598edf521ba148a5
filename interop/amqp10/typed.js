'use strict';
/*
 * The fidelity matrix's typed JSON (interop/fidelity/canon.py) as the message an application builds
 * with amqp10's typed API: amqp10.Type.<name>(value) (a ForcedType), amqp10.Type.described(d, v),
 * AMQPArray for arrays, DescribedType(0x75/0x76/0x77, ...) for the body section.
 *
 * Scalars always go in as ForcedType, even null / false / "": amqp10's encoder writes a described
 * value whose value is falsy (other than 0) as an empty list, and a ForcedType is never falsy.
 * 64-bit integers and timestamps go in as node-int64 values (amqp10's own 64-bit representation).
 *
 * What amqp10 3.6.0 cannot express raises Unsendable with the reason; the matrix lists each as
 * the client's limitation (KNOWN_LIMITATIONS in tests/interop/test_fidelity_matrix.py).
 */
const { Type, DescribedType } = require('amqp10');
const AMQPArray = require('amqp10/lib/types/amqp_composites').Array;
const ForcedType = require('amqp10/lib/types/forced_type');
const Int64 = require('node-int64');

class Unsendable extends Error {}

const HEADER = 0x70, ANNOTATIONS = 0x72, PROPERTIES = 0x73, APP_PROPS = 0x74, DATA = 0x75,
    SEQUENCE = 0x76, VALUE = 0x77, FOOTER = 0x78;

// The element constructor of an array of each type: amqp10 writes it once, then each element's
// value with that encoding's encoder.
const ARRAY_CODE = {
    null: 0x40, boolean: 0x56, ubyte: 0x50, byte: 0x51, ushort: 0x60, short: 0x61, uint: 0x70, int: 0x71,
    ulong: 0x80, long: 0x81, float: 0x72, double: 0x82, timestamp: 0x83, uuid: 0x98, binary: 0xb0,
    string: 0xb1, symbol: 0xb3, list: 0xd0, map: 0xd1, array: 0xf0,
};

function int64(text, signed) {
    const buf = Buffer.alloc(8);
    if (signed) buf.writeBigInt64BE(BigInt(text)); else buf.writeBigUInt64BE(BigInt(text));
    return new Int64(buf);
}

/** A ulong / long as amqp10's ulong and long encoders take it: a safe number, else an Int64. */
function wide(text, signed) {
    const big = BigInt(text);
    if (!signed && big >= 2n ** 63n) {
        // its ulong encoder picks the encoding from the Int64 read as signed (negative: smallulong)
        throw new Unsendable('amqp10 cannot encode a ulong of 2^63 or more');
    }
    if (big >= BigInt(Number.MIN_SAFE_INTEGER) && big <= BigInt(Number.MAX_SAFE_INTEGER)) return Number(big);
    return int64(text, signed);
}

const hex = (s) => Buffer.from(s, 'hex');

/** One typed-JSON value as the value amqp10's encoder takes. */
function typed(value) {
    const [kind, v] = Object.entries(value)[0];
    switch (kind) {
    case 'null': return Type.null(null);
    case 'boolean': case 'ubyte': case 'byte': case 'ushort': case 'short': case 'uint': case 'int':
    case 'string': case 'symbol':
        return Type[kind](v);
    case 'ulong': case 'long': return Type[kind](wide(v, kind === 'long'));
    case 'timestamp': return Type.timestamp(int64(v, true));
    case 'float': return Type.float(hex(v).readFloatBE(0));
    case 'double': return Type.double(hex(v).readDoubleBE(0));
    case 'decimal32': case 'decimal64': case 'decimal128':
        throw new Unsendable(`amqp10 has no encoder for ${kind} (its encoding is registered without one)`);
    case 'char':
        // amqp10's char encoder writes the 0x73 constructor a second time after the one the codec
        // wrote, and takes the value as charCodeAt(0) (one UTF-16 unit)
        throw new Unsendable('amqp10 encodes a char with its constructor byte twice');
    case 'uuid': return Type.uuid(v);
    case 'binary': return hex(v);
    case 'list': return v.map(typed);
    case 'map': return mapOf(v);
    case 'described': {
        const [descriptor, inner] = [v[0], typed(v[1])];
        return Type.described(descriptorOf(descriptor), inner);
    }
    case 'array': return arrayOf(v);
    default: throw new TypeError('unknown type ' + kind);
    }
}

/** amqp10 writes a number descriptor as a ulong and anything else as a symbol. */
function descriptorOf(descriptor) {
    if ('symbol' in descriptor) return descriptor.symbol;
    if ('ulong' in descriptor && BigInt(descriptor.ulong) <= BigInt(Number.MAX_SAFE_INTEGER)) {
        return Number(descriptor.ulong);
    }
    throw new Unsendable('amqp10 takes a ulong descriptor as a JavaScript number: above 2^53 it is not exact');
}

/** A map is a JavaScript object to amqp10, so its keys are strings. */
function mapOf(pairs) {
    const out = {};
    for (const [k, x] of pairs) {
        if (!('string' in k)) {
            throw new Unsendable('amqp10 encodes a map from a JavaScript object: keys can only be strings');
        }
        out[k.string] = typed(x);
    }
    return out;
}

function arrayOf(v) {
    if (v.descriptor !== undefined) throw new Unsendable('amqp10 arrays have no descriptor');
    if (v.items.length === 0) throw new Unsendable('amqp10 encodes an empty array as null');
    const code = ARRAY_CODE[v.type];
    if (code === undefined) return typed({ [v.type]: null }); // raises the type's own Unsendable
    return new AMQPArray(v.items.map(element), code);
}

/** An array element: the value alone, as the element encoding's encoder takes it. */
function element(value) {
    const [kind] = Object.keys(value);
    if (kind === 'array') throw new Unsendable('amqp10 cannot encode an array inside an array');
    if (kind === 'ulong') return int64(value.ulong, false); // the ulong element encoder writes any Int64 as it is
    const t = typed(value);
    return t instanceof ForcedType ? t.value : t;
}

const PROPERTY_FIELDS = ['messageId', 'userId', 'to', 'subject', 'replyTo', 'correlationId', 'contentType',
    'contentEncoding', 'absoluteExpiryTime', 'creationTime', 'groupId', 'groupSequence', 'replyToGroupId'];
const HEADER_FIELDS = ['durable', 'priority', 'ttl', 'firstAcquirer', 'deliveryCount'];

/** A composite section (header, properties) as amqp10's object of typed field values. */
function fieldsOf(list, names) {
    const out = {};
    list.forEach((field, i) => {
        if (!('null' in field)) out[names[i]] = typed(field);
    });
    return out;
}

/** `[[section code, typed JSON], ...]` as an amqp10 message object. */
function messageOf(sections) {
    const msg = {};
    let bodies = 0;
    for (const [code, value] of sections) {
        if (code === HEADER) {
            msg.header = fieldsOf(value.list, HEADER_FIELDS);
        } else if (code === PROPERTIES) {
            msg.properties = fieldsOf(value.list, PROPERTY_FIELDS);
        } else if (code === ANNOTATIONS) {
            msg.messageAnnotations = Object.fromEntries(value.map.map(([k, x]) => [k.symbol, typed(x)]));
        } else if (code === APP_PROPS) {
            msg.applicationProperties = mapOf(value.map);
        } else if (code === DATA || code === SEQUENCE || code === VALUE) {
            if (++bodies > 1) {
                throw new Unsendable('an amqp10 message has one body section (message.body)');
            }
            msg.body = new DescribedType(code, code === DATA ? hex(value.binary) : typed(value));
        } else if (code === FOOTER) {
            msg.footer = mapOf(value.map.map(([k, x]) => [{ string: Object.values(k)[0] }, x]));
        } else {
            throw new TypeError('unsupported section 0x' + code.toString(16));
        }
    }
    return msg;
}

module.exports = { typed, messageOf, Unsendable };
