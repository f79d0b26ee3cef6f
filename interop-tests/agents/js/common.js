'use strict';
// Shared by the JS interop agents (see ../CONTRACT.md): the command line,
// typed JSON <-> a neutral in-memory form, message JSON, and the single
// JSON document each run prints with its exit code.
//
// Neutral typed value: {t: TYPE, v: VALUE} where VALUE is
//   null (null) | boolean | number (ubyte..int, float, double)
//   | BigInt (ulong, long, timestamp) | Buffer (binary, uuid, decimal*)
//   | string (string, symbol, char) | [typed] (list) | [[typed, typed]] (map)
//   | {element: TYPE, values: [typed]} (array) | {descriptor, value} (described)
// A decoder that got no usable value (e.g. an invalid Date) puts v = null.

const fs = require('fs');

class UsageError extends Error {}
class Unsupported extends Error {}

const USAGE = 'usage: AGENT send|receive|attach|request|mgmt-query --url HOST:PORT ' +
    '[--sasl none|anonymous] [--timeout S] [--queue Q] [--file F] [--count N] [--credit C] ' +
    '[--refill each|window] [--outcomes] [--selector S] [--role sender|receiver] [--entity-type T]';

const COMMANDS = {
    'send': ['queue', 'file'],
    'receive': ['queue', 'count'],
    'attach': ['queue'],
    'request': ['queue', 'file'],
    'mgmt-query': ['entityType'],
};
const VALUED = {'--url': 'url', '--sasl': 'sasl', '--timeout': 'timeout', '--queue': 'queue',
    '--file': 'file', '--count': 'count', '--credit': 'credit', '--refill': 'refill',
    '--role': 'role', '--entity-type': 'entityType', '--selector': 'selector'};

function parseArgs(argv) {
    const o = {sasl: 'none', timeout: 20, credit: 100, refill: 'window', outcomes: false, role: 'receiver'};
    if (argv.length === 0) throw new UsageError('no command; ' + USAGE);
    o.command = argv[0];
    if (!COMMANDS[o.command]) throw new UsageError('unknown command ' + o.command + '; ' + USAGE);
    for (let i = 1; i < argv.length; i++) {
        const a = argv[i];
        if (a === '--outcomes') { o.outcomes = true; continue; }
        const key = VALUED[a];
        if (!key) throw new UsageError('unknown option ' + a + '; ' + USAGE);
        if (i + 1 >= argv.length) throw new UsageError(a + ' needs a value');
        o[key] = argv[++i];
    }
    if (!o.url) throw new UsageError('--url is required');
    const m = /^(.*):(\d+)$/.exec(o.url);
    if (!m || !m[1]) throw new UsageError('--url must be HOST:PORT, got ' + o.url);
    o.host = m[1].replace(/^\[(.*)\]$/, '$1');
    o.port = Number(m[2]);
    if (o.sasl !== 'none' && o.sasl !== 'anonymous') throw new UsageError('--sasl must be none or anonymous');
    if (o.refill !== 'each' && o.refill !== 'window') throw new UsageError('--refill must be each or window');
    if (o.role !== 'sender' && o.role !== 'receiver') throw new UsageError('--role must be sender or receiver');
    for (const k of ['timeout', 'count', 'credit']) {
        if (typeof o[k] === 'string') {
            if (!/^\d+(\.\d+)?$/.test(o[k])) throw new UsageError('--' + k + ' must be a number');
            o[k] = Number(o[k]);
        }
    }
    if (!Number.isInteger(o.count === undefined ? 0 : o.count) || !Number.isInteger(o.credit) || o.credit < 1) {
        throw new UsageError('--count and --credit must be whole numbers, --credit at least 1');
    }
    for (const k of COMMANDS[o.command]) {
        if (o[k] === undefined) throw new UsageError(o.command + ' needs --' + k.replace('entityType', 'entity-type'));
    }
    return o;
}

// ---- output and exit -------------------------------------------------------

let finished = false;
function finish(code, doc) {
    if (finished) return;
    finished = true;
    process.stdout.write(JSON.stringify(doc) + '\n', () => process.exit(code));
}

function fail(err) {
    if (err instanceof Unsupported) finish(3, {unsupported: err.message});
    else if (err instanceof UsageError) finish(2, {error: err.message});
    else finish(1, {error: (err && err.message) ? err.message : String(err)});
}

// Runs COMMANDS[o.command](o, progress) of an agent. The handler returns a
// promise of the document to print; progress.phase is included in a time-out
// message. cleanup(o) (optional) closes the connection before printing.
function run(handlers, cleanup) {
    let o;
    try {
        o = parseArgs(process.argv.slice(2));
    } catch (e) {
        return fail(e);
    }
    const progress = {phase: 'connecting'};
    const onError = (e) => {
        if (process.env.WHARF_AGENT_DEBUG) console.error(e);
        fail(handlers.classifyError ? handlers.classifyError(e) : e);
    };
    process.on('uncaughtException', onError);
    process.on('unhandledRejection', onError);
    // Also keeps the process alive until finish() exits it.
    setTimeout(() => fail(new Error('timed out after ' + o.timeout + ' s (' + progress.phase + ')')), o.timeout * 1000);
    Promise.resolve()
        .then(() => handlers[o.command](o, progress))
        .then((doc) => Promise.resolve(cleanup ? cleanup(o) : null).catch(() => null).then(() => doc))
        .then((doc) => finish(0, doc),
            onError);
}

// ---- typed JSON in ---------------------------------------------------------

const INT_RANGES = {
    ubyte: [0, 255], ushort: [0, 65535], uint: [0, 4294967295],
    byte: [-128, 127], short: [-32768, 32767], int: [-2147483648, 2147483647],
};
const BIG_RANGES = {
    ulong: [0n, (1n << 64n) - 1n], long: [-(1n << 63n), (1n << 63n) - 1n],
    timestamp: [-(1n << 63n), (1n << 63n) - 1n],
};
const DECIMAL_BYTES = {decimal32: 4, decimal64: 8, decimal128: 16};
const TYPES = ['null', 'boolean', 'ubyte', 'ushort', 'uint', 'ulong', 'byte', 'short', 'int', 'long',
    'float', 'double', 'decimal32', 'decimal64', 'decimal128', 'char', 'timestamp', 'uuid', 'binary',
    'string', 'symbol', 'list', 'map', 'array'];
const UUID_RE = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

function bad(where, what) {
    return new UsageError(where + ': ' + what);
}

function parseHex(s, where) {
    if (typeof s !== 'string' || s.length % 2 !== 0 || /[^0-9a-fA-F]/.test(s)) {
        throw bad(where, 'expected hex bytes, got ' + String(JSON.stringify(s)).slice(0, 40));
    }
    return Buffer.from(s, 'hex');
}

function parseBig(v, where) {
    if (typeof v === 'number' && Number.isSafeInteger(v)) return BigInt(v);
    if (typeof v === 'string' && /^-?\d+$/.test(v)) return BigInt(v);
    throw bad(where, 'expected a decimal string, got ' + JSON.stringify(v));
}

// The bare value V of type T (as in the "values" of an array).
function parseBare(t, v, where) {
    if (!TYPES.includes(t)) throw bad(where, 'unknown type ' + JSON.stringify(t));
    if (INT_RANGES[t]) {
        const [lo, hi] = INT_RANGES[t];
        if (!Number.isInteger(v) || v < lo || v > hi) throw bad(where, t + ' out of range: ' + JSON.stringify(v));
        return {t, v};
    }
    if (BIG_RANGES[t]) {
        const b = parseBig(v, where);
        const [lo, hi] = BIG_RANGES[t];
        if (b < lo || b > hi) throw bad(where, t + ' out of range: ' + v);
        return {t, v: b};
    }
    if (DECIMAL_BYTES[t]) {
        const b = parseHex(v, where);
        if (b.length !== DECIMAL_BYTES[t]) throw bad(where, t + ' needs ' + DECIMAL_BYTES[t] + ' bytes');
        return {t, v: b};
    }
    switch (t) {
    case 'null':
        if (v !== null) throw bad(where, 'null takes null');
        return {t, v: null};
    case 'boolean':
        if (typeof v !== 'boolean') throw bad(where, 'expected true/false');
        return {t, v};
    case 'float': case 'double':
        if (typeof v !== 'number') throw bad(where, 'expected a number');
        return {t, v};
    case 'char':
        if (typeof v !== 'string' || [...v].length !== 1) throw bad(where, 'char takes one code point');
        return {t, v};
    case 'uuid':
        if (typeof v !== 'string' || !UUID_RE.test(v)) throw bad(where, 'expected a canonical uuid');
        return {t, v: Buffer.from(v.replace(/-/g, ''), 'hex')};
    case 'binary':
        return {t, v: parseHex(v, where)};
    case 'string':
        if (typeof v !== 'string') throw bad(where, 'expected a string');
        return {t, v};
    case 'symbol':
        if (typeof v !== 'string' || !/^[\x00-\x7f]*$/.test(v)) throw bad(where, 'a symbol is an ASCII string');
        return {t, v};
    case 'list':
        if (!Array.isArray(v)) throw bad(where, 'list takes a JSON list');
        return {t, v: v.map((x, i) => parseTyped(x, where + '[' + i + ']'))};
    case 'map':
        if (!Array.isArray(v)) throw bad(where, 'map takes a list of [key, value] pairs');
        return {t, v: v.map((p, i) => {
            if (!Array.isArray(p) || p.length !== 2) throw bad(where + '[' + i + ']', 'expected a [key, value] pair');
            return [parseTyped(p[0], where + '[' + i + '][0]'), parseTyped(p[1], where + '[' + i + '][1]')];
        })};
    case 'array': {
        if (!v || typeof v !== 'object' || typeof v.element !== 'string' || !Array.isArray(v.values)) {
            throw bad(where, 'array takes {"element": T, "values": [...]}');
        }
        const element = v.element;
        return {t, v: {element, values: v.values.map((x, i) => parseBare(element, x, where + '.values[' + i + ']'))}};
    }
    }
    throw bad(where, 'unhandled type ' + t);
}

function parseTyped(x, where) {
    if (!x || typeof x !== 'object' || Array.isArray(x) || typeof x.type !== 'string' || !('value' in x)) {
        throw bad(where, 'expected {"type": T, "value": V}, got ' + JSON.stringify(x));
    }
    return parseBare(x.type, x.value, where);
}

// ---- typed JSON out --------------------------------------------------------

function uuidString(b) {
    const h = b.toString('hex');
    return h.slice(0, 8) + '-' + h.slice(8, 12) + '-' + h.slice(12, 16) + '-' + h.slice(16, 20) + '-' + h.slice(20);
}

function bareJSON(tv) {
    const {t, v} = tv;
    if (v === null || v === undefined) return null;
    switch (t) {
    case 'ulong': case 'long': case 'timestamp': return v.toString();
    case 'decimal32': case 'decimal64': case 'decimal128': case 'binary': return v.toString('hex');
    case 'uuid': return uuidString(v);
    case 'list': return v.map(typedJSON);
    case 'map': return v.map(([k, x]) => [typedJSON(k), typedJSON(x)]);
    case 'array': return {element: v.element, values: v.values.map(bareJSON)};
    case 'described': return {descriptor: typedJSON(v.descriptor), value: typedJSON(v.value)};
    default: return v;
    }
}

function typedJSON(tv) {
    return {type: tv.t, value: bareJSON(tv)};
}

// ---- messages --------------------------------------------------------------

const HEADER_FIELDS = ['durable', 'priority', 'ttl', 'first_acquirer', 'delivery_count'];
const PROPERTY_FIELDS = ['message_id', 'user_id', 'to', 'subject', 'reply_to', 'correlation_id',
    'content_type', 'content_encoding', 'absolute_expiry_time', 'creation_time', 'group_id',
    'group_sequence', 'reply_to_group_id'];
const HEADER_KINDS = {durable: 'boolean', priority: 'ubyte', ttl: 'uint', first_acquirer: 'boolean', delivery_count: 'uint'};
const PROPERTY_KINDS = {message_id: 'id', user_id: 'hex', to: 'str', subject: 'str', reply_to: 'str',
    correlation_id: 'id', content_type: 'sym', content_encoding: 'sym', absolute_expiry_time: 'ms',
    creation_time: 'ms', group_id: 'str', group_sequence: 'uint', reply_to_group_id: 'str'};

// A message JSON object -> {header, properties, application_properties: [[key, typed]], body}
// with body {kind: 'value', value} | {kind: 'data', sections: [Buffer]} | {kind: 'sequence', sections: [[typed]]}.
function parseMessage(m, where) {
    if (!m || typeof m !== 'object' || Array.isArray(m)) throw bad(where, 'a message is a JSON object');
    for (const k of Object.keys(m)) {
        if (!['header', 'properties', 'application_properties', 'body'].includes(k)) throw bad(where, 'unknown section ' + k);
    }
    const out = {};
    if (m.header !== undefined) {
        out.header = {};
        for (const [k, v] of Object.entries(m.header)) {
            const kind = HEADER_KINDS[k];
            if (!kind) throw bad(where + '.header', 'unknown field ' + k);
            out.header[k] = parseBare(kind, v, where + '.header.' + k).v;
        }
    }
    if (m.properties !== undefined) {
        out.properties = {};
        for (const [k, v] of Object.entries(m.properties)) {
            const kind = PROPERTY_KINDS[k];
            const w = where + '.properties.' + k;
            if (!kind) throw bad(where + '.properties', 'unknown field ' + k);
            if (kind === 'id') {
                const id = parseTyped(v, w);
                if (!['ulong', 'uuid', 'binary', 'string'].includes(id.t)) throw bad(w, 'must be ulong, uuid, binary or string');
                out.properties[k] = id;
            } else if (kind === 'hex') out.properties[k] = parseHex(v, w);
            else if (kind === 'ms') out.properties[k] = parseBare('timestamp', v, w).v;
            else if (kind === 'uint') out.properties[k] = parseBare('uint', v, w).v;
            else out.properties[k] = parseBare(kind === 'sym' ? 'symbol' : 'string', v, w).v;
        }
    }
    if (m.application_properties !== undefined) {
        const ap = m.application_properties;
        if (!ap || typeof ap !== 'object' || Array.isArray(ap)) throw bad(where, 'application_properties is an object');
        out.application_properties = Object.entries(ap).map(([k, v]) => [k, parseTyped(v, where + '.application_properties.' + k)]);
    }
    if (m.body !== undefined) {
        const b = m.body;
        const keys = b && typeof b === 'object' ? Object.keys(b) : [];
        if (keys.length !== 1) throw bad(where + '.body', 'one of value, data, sequence');
        if (keys[0] === 'value') out.body = {kind: 'value', value: parseTyped(b.value, where + '.body.value')};
        else if (keys[0] === 'data') {
            const parts = Array.isArray(b.data) ? b.data : [b.data];
            out.body = {kind: 'data', sections: parts.map((h, i) => parseHex(h, where + '.body.data[' + i + ']'))};
        } else if (keys[0] === 'sequence') {
            if (!Array.isArray(b.sequence)) throw bad(where + '.body', 'sequence is a list of sections');
            out.body = {kind: 'sequence', sections: b.sequence.map((s, i) => {
                const w = where + '.body.sequence[' + i + ']';
                // A section is a typed list ({"type": "list", "value": [...]}); a bare JSON list of typed values is accepted too.
                if (Array.isArray(s)) return s.map((x, j) => parseTyped(x, w + '[' + j + ']'));
                const l = parseTyped(s, w);
                if (l.t !== 'list') throw bad(w, 'a sequence section is a list');
                return l.v;
            })};
        } else throw bad(where + '.body', 'one of value, data, sequence');
    }
    return out;
}

function readMessages(file) {
    let doc;
    try {
        doc = JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch (e) {
        throw new UsageError('cannot read ' + file + ': ' + e.message);
    }
    if (!Array.isArray(doc)) throw new UsageError(file + ' must hold a JSON list of messages');
    return doc.map((m, i) => parseMessage(m, file + '[' + i + ']'));
}

// Decoded message (same shape as parseMessage's, values as decoded; header and
// properties hold only fields that were present) -> message JSON. A header or
// properties section with no field set prints as absent.
function messageJSON(d) {
    const out = {};
    if (d.header && Object.keys(d.header).length) {
        out.header = {};
        for (const k of HEADER_FIELDS) if (d.header[k] !== undefined) out.header[k] = d.header[k];
    }
    if (d.properties && Object.keys(d.properties).length) {
        out.properties = {};
        for (const k of PROPERTY_FIELDS) {
            const v = d.properties[k];
            if (v === undefined) continue;
            const kind = PROPERTY_KINDS[k];
            if (kind === 'id') out.properties[k] = typedJSON(v);
            else if (kind === 'hex') out.properties[k] = Buffer.isBuffer(v) ? v.toString('hex') : v;
            else if (kind === 'ms') out.properties[k] = v === null ? null : v.toString();
            else out.properties[k] = v;
        }
    }
    if (d.application_properties) {
        out.application_properties = {};
        for (const [k, v] of d.application_properties) out.application_properties[k] = typedJSON(v);
    }
    if (d.body) {
        if (d.body.kind === 'value') out.body = {value: typedJSON(d.body.value)};
        else if (d.body.kind === 'data') {
            const hex = d.body.sections.map((b) => b.toString('hex'));
            out.body = {data: hex.length === 1 ? hex[0] : hex};
        } else out.body = {sequence: d.body.sections.map((s) => ({type: 'list', value: s.map(typedJSON)}))};
    }
    return out;
}

// ---- small helpers ----------------------------------------------------------

function big64(v, signed) {
    const b = Buffer.alloc(8);
    if (signed) b.writeBigInt64BE(v); else b.writeBigUInt64BE(v);
    return b;
}

// What receive does with a delivery under --outcomes: 'accept' | 'reject' | 'release' | 'modify'.
function makeOutcomeChooser(useOutcomes) {
    const seen = new Set();
    return function (decoded) {
        if (!useOutcomes) return 'accept';
        let want = null;
        for (const [k, v] of decoded.application_properties || []) if (k === 'want') want = v.v;
        const id = decoded.properties && decoded.properties.message_id !== undefined ?
            JSON.stringify(typedJSON(decoded.properties.message_id)) : 'none';
        if (want === 'reject') return 'reject';
        if (want === 'release' || want === 'modify') {
            if (seen.has(id)) return 'accept';
            seen.add(id);
            return want;
        }
        return 'accept';
    };
}

const MGMT_PROPERTIES = (entityType) => [
    ['operation', {t: 'string', v: 'QUERY'}], ['type', {t: 'string', v: 'org.amqp.management'}],
    ['name', {t: 'string', v: 'self'}], ['entityType', {t: 'string', v: entityType}]];
const MGMT_BODY = {t: 'map', v: [[{t: 'string', v: 'attributeNames'}, {t: 'list', v: []}]]};

module.exports = {
    UsageError, Unsupported, run, parseArgs, readMessages, parseMessage, parseTyped, typedJSON, bareJSON,
    messageJSON, uuidString, big64, makeOutcomeChooser, HEADER_FIELDS, PROPERTY_FIELDS, MGMT_PROPERTIES, MGMT_BODY,
};
