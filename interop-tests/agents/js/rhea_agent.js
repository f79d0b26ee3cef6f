#!/usr/bin/env node
'use strict';
// Interop agent for rhea (see ../CONTRACT.md and README.md).
//
// Encoding uses rhea's own typed constructors (rhea.types.wrap_*, the
// Decimal* constructors, rhea.message.data_section / sequence_section).
// Decoding uses rhea's own decoder, rhea.types.Reader, on the transfer payload:
// rhea's message API (context.message) unwraps every value to a plain JS value
// and so forgets the AMQP types, while the Reader keeps the type code of each
// value. rhea does not hand the payload to the application, so the agent
// wraps rhea.message.decode (which rhea calls for every delivery) to keep it.

const rhea = require('rhea');
const C = require('./common');

const types = rhea.types;

const originalDecode = rhea.message.decode;
rhea.message.decode = function (buffer) {
    const msg = originalDecode(buffer);
    Object.defineProperty(msg, 'wharf_payload', {value: buffer, enumerable: false});
    return msg;
};

// ---- neutral typed value -> rhea -------------------------------------------

const ARRAY_CODES = {
    null: 0x40, boolean: 0x56, ubyte: 0x50, ushort: 0x60, uint: 0x70, ulong: 0x80, byte: 0x51,
    short: 0x61, int: 0x71, long: 0x81, float: 0x72, double: 0x82, decimal32: 0x74, decimal64: 0x84,
    decimal128: 0x94, char: 0x73, timestamp: 0x83, uuid: 0x98, binary: 0xb0, string: 0xb1,
    symbol: 0xb3, list: 0xd0, map: 0xd1,
};

function toRhea(tv) {
    const v = tv.v;
    switch (tv.t) {
    case 'null': return types.Null();
    case 'boolean': return types.wrap_boolean(v);
    case 'ubyte': return types.wrap_ubyte(v);
    case 'ushort': return types.wrap_ushort(v);
    case 'uint': return types.wrap_uint(v);
    case 'byte': return types.wrap_byte(v);
    case 'short': return types.wrap_short(v);
    case 'int': return types.wrap_int(v);
    // rhea takes the 8 big-endian bytes for 64-bit values, so nothing is rounded.
    case 'ulong': return types.wrap_ulong(C.big64(v, false));
    case 'long': return types.wrap_long(C.big64(v, true));
    case 'timestamp': return types.wrap_timestamp(C.big64(v, true));
    case 'float': return types.wrap_float(v);
    case 'double': return types.wrap_double(v);
    case 'decimal32': return types.Decimal32(v);
    case 'decimal64': return types.Decimal64(v);
    case 'decimal128': return types.Decimal128(v);
    case 'char': return types.wrap_char(v.codePointAt(0));
    case 'uuid': return types.wrap_uuid(v);
    case 'binary': return types.wrap_binary(v);
    case 'string': return types.wrap_string(v);
    case 'symbol': return types.wrap_symbol(v);
    case 'list': return types.wrap_list(v.map(toRhea));
    // A JS Map keeps the order, and typed keys stay typed.
    case 'map': return types.wrap_map_as_map(new Map(v.map(([k, x]) => [toRhea(k), toRhea(x)])));
    case 'array': {
        if (v.element === 'array') {
            // Writer.write_value calls write_array(type, value) without the
            // element constructor, which write_array dereferences (types.js).
            throw new C.Unsupported('rhea cannot encode an array of arrays: types.Writer.write_value ' +
                'passes no element constructor to write_array');
        }
        return types.wrap_array(v.values.map(arrayElement), ARRAY_CODES[v.element]);
    }
    }
    throw new Error('cannot encode type ' + tv.t);
}

// The raw value rhea's Writer.write_value expects for one array element.
function arrayElement(tv) {
    switch (tv.t) {
    case 'boolean': return tv.v ? 1 : 0;
    case 'ulong': return C.big64(tv.v, false);
    case 'long': case 'timestamp': return C.big64(tv.v, true);
    case 'char': return tv.v.codePointAt(0);
    case 'list': return tv.v.map(toRhea);
    case 'map': return [].concat(...tv.v.map(([k, x]) => [toRhea(k), toRhea(x)]));
    default: return tv.v;
    }
}

function toRheaMessage(m) {
    const msg = {};
    Object.assign(msg, m.header || {});
    const p = m.properties || {};
    for (const k of Object.keys(p)) {
        const v = p[k];
        if (k === 'message_id' || k === 'correlation_id') msg[k] = toRhea(v);
        else if (k === 'absolute_expiry_time' || k === 'creation_time') msg[k] = C.big64(v, true);
        else msg[k] = v;
    }
    if (m.application_properties) {
        msg.application_properties = {};
        for (const [k, v] of m.application_properties) msg.application_properties[k] = toRhea(v);
    }
    if (!m.body) {
        // message.js wrap_body encodes an absent body as an amqp-value null.
        throw new C.Unsupported('rhea cannot send a message without a body: message.encode always adds ' +
            'an amqp-value section (null when no body is set)');
    }
    const b = m.body;
    if (b.kind === 'value') msg.body = toRhea(b.value);
    else if (b.kind === 'data') {
        msg.body = b.sections.length === 1 ? rhea.message.data_section(b.sections[0]) : rhea.message.data_sections(b.sections);
    } else {
        const lists = b.sections.map((s) => s.map(toRhea));
        msg.body = lists.length === 1 ? rhea.message.sequence_section(lists[0]) : rhea.message.sequence_sections(lists);
    }
    return msg;
}

// ---- rhea (types.Reader output) -> neutral typed value ------------------------

const NAMES = {
    0x40: 'null', 0x41: 'boolean', 0x42: 'boolean', 0x56: 'boolean', 0x50: 'ubyte', 0x60: 'ushort',
    0x70: 'uint', 0x52: 'uint', 0x43: 'uint', 0x80: 'ulong', 0x53: 'ulong', 0x44: 'ulong', 0x51: 'byte',
    0x61: 'short', 0x71: 'int', 0x54: 'int', 0x81: 'long', 0x55: 'long', 0x72: 'float', 0x82: 'double',
    0x74: 'decimal32', 0x84: 'decimal64', 0x94: 'decimal128', 0x73: 'char', 0x83: 'timestamp',
    0x98: 'uuid', 0xa0: 'binary', 0xb0: 'binary', 0xa1: 'string', 0xb1: 'string', 0xa3: 'symbol',
    0xb3: 'symbol', 0x45: 'list', 0xc0: 'list', 0xd0: 'list', 0xc1: 'map', 0xd1: 'map', 0xe0: 'array',
    0xf0: 'array',
};

function fromRhea(x) {
    if (x.descriptor) {
        const plain = Object.assign(Object.create(Object.getPrototypeOf(x)), x);
        delete plain.descriptor;
        return {t: 'described', v: {descriptor: fromRhea(x.descriptor), value: fromRhea(plain)}};
    }
    const code = x.type.typecode;
    const t = NAMES[code];
    if (!t) throw new Error('rhea gave an unknown type code 0x' + code.toString(16));
    return {t, v: bareFromRhea(t, code, x)};
}

function bareFromRhea(t, code, x) {
    const v = x.value;
    switch (t) {
    case 'null': return null;
    case 'boolean': return code === 0x41 ? true : code === 0x42 ? false : v !== 0;
    // rhea's read_ulong/read_long give a Number below 2^53 (plus one 2^32
    // range past it, rounded) and the 8 raw bytes above: print what it gave.
    case 'ulong': return typeof v === 'number' ? BigInt(v) : v.readBigUInt64BE(0);
    case 'long': return typeof v === 'number' ? BigInt(v) : v.readBigInt64BE(0);
    // read_timestamp gives a Date: an invalid one past Date's range (+-8.64e15 ms).
    case 'timestamp': return Number.isNaN(v.getTime()) ? null : BigInt(v.getTime());
    case 'char': try { return String.fromCodePoint(v); } catch (e) { return null; }
    case 'list': return v.map(fromRhea);
    case 'map': {
        const pairs = [];
        for (let i = 0; i + 1 < v.length; i += 2) pairs.push([fromRhea(v[i]), fromRhea(v[i + 1])]);
        return pairs;
    }
    case 'array': {
        const ecode = x.array_constructor.typecode;
        const element = NAMES[ecode];
        if (!element) throw new Error('rhea gave an unknown array element code 0x' + ecode.toString(16));
        return {element, values: v.map((e) => ({t: element, v: bareFromRhea(element, ecode, e)}))};
    }
    default: return v; // numbers, strings, Buffers (binary, uuid, decimal*)
    }
}

function sectionCode(descriptor) {
    const d = descriptor.value;
    const symbolic = {'amqp:header:list': 0x70, 'amqp:delivery-annotations:map': 0x71,
        'amqp:message-annotations:map': 0x72, 'amqp:properties:list': 0x73,
        'amqp:application-properties:map': 0x74, 'amqp:data:binary': 0x75,
        'amqp:amqp-sequence:list': 0x76, 'amqp:value:*': 0x77, 'amqp:footer:map': 0x78};
    return typeof d === 'number' ? d : symbolic[d];
}

function plainField(x) {
    const tv = fromRhea(x);
    return typeof tv.v === 'bigint' ? Number(tv.v) : tv.v;
}

function decodePayload(buffer) {
    const reader = new types.Reader(buffer);
    const d = {};
    while (reader.remaining()) {
        const s = reader.read();
        const code = s.descriptor ? sectionCode(s.descriptor) : undefined;
        if (code === 0x70 || code === 0x73) {
            const names = code === 0x70 ? C.HEADER_FIELDS : C.PROPERTY_FIELDS;
            const fields = {};
            s.value.forEach((f, i) => {
                if (i >= names.length || f.type.typecode === 0x40) return;
                const name = names[i];
                if (name === 'message_id' || name === 'correlation_id') fields[name] = fromRhea(f);
                else if (name === 'absolute_expiry_time' || name === 'creation_time') fields[name] = fromRhea(f).v;
                else fields[name] = plainField(f);
            });
            d[code === 0x70 ? 'header' : 'properties'] = fields;
        } else if (code === 0x74) {
            d.application_properties = [];
            for (let i = 0; i + 1 < s.value.length; i += 2) {
                d.application_properties.push([String(fromRhea(s.value[i]).v), fromRhea(s.value[i + 1])]);
            }
        } else if (code === 0x75) {
            if (!d.body) d.body = {kind: 'data', sections: []};
            d.body.sections.push(s.value);
        } else if (code === 0x76) {
            if (!d.body) d.body = {kind: 'sequence', sections: []};
            d.body.sections.push(s.value.map(fromRhea));
        } else if (code === 0x77) {
            const plain = Object.assign(Object.create(Object.getPrototypeOf(s)), s);
            delete plain.descriptor;
            d.body = {kind: 'value', value: fromRhea(plain)};
        }
        // delivery/message annotations and footer are not part of the contract's message JSON.
    }
    return d;
}

// ---- connection plumbing ------------------------------------------------------

let connection = null;
let connectionFailed = null; // a promise that rejects when the connection fails

function connect(o) {
    const container = rhea.create_container({id: 'wharf-interop-rhea-' + process.pid});
    const opts = {host: o.host, port: o.port, reconnect: false};
    if (o.sasl === 'anonymous') {
        const mechanisms = rhea.sasl.client_mechanisms();
        mechanisms.enable_anonymous();
        opts.sasl_mechanisms = mechanisms;
    }
    connectionFailed = new Promise((resolve, reject) => {
        const describe = (what, e) => what + (e ? ': ' + (e.condition ? e.condition + ' ' : '') + (e.description || e.message || e) : '');
        container.on('error', (e) => reject(new Error(describe('rhea error', e))));
        container.on('connection_error', (ctx) => reject(new Error(describe('connection closed by the peer', ctx.connection.error))));
        container.on('connection_close', () => reject(new Error('connection closed by the peer')));
        container.on('session_error', (ctx) => reject(new Error(describe('session ended by the peer', ctx.session.error))));
        container.on('disconnected', (ctx) => reject(new Error(describe('disconnected', ctx.error))));
    });
    connection = container.connect(opts);
    return connection;
}

function closeConnection() {
    if (!connection || !connection.is_open()) return null;
    return new Promise((resolve) => {
        connection.once('connection_close', resolve);
        connection.once('disconnected', resolve);
        setTimeout(resolve, 1000);
        connection.close();
    });
}

function errorJSON(e) {
    if (!e) return {condition: null, description: null, info: null};
    const info = e.value && e.value[2];
    return {
        condition: e.condition === undefined ? null : e.condition,
        description: e.description === undefined ? null : e.description,
        info: info && info.type && info.type.typecode !== 0x40 ? C.typedJSON(fromRhea(info)) : null,
    };
}

function linkFailure(link) {
    const e = errorJSON(link.remote.detach && link.remote.detach.error);
    return new Error('link detached by the peer: ' + e.condition + ' ' + e.description);
}

// ---- commands -----------------------------------------------------------------

function send(o, progress) {
    const msgs = C.readMessages(o.file).map(toRheaMessage);
    const conn = connect(o);
    progress.phase = 'attaching the sender';
    const sender = conn.open_sender({target: {address: o.queue}, autosettle: true, treat_modified_as_released: false});
    const work = new Promise((resolve, reject) => {
        const outcomes = new Array(msgs.length);
        let next = 0;
        let known = 0;
        const record = (ctx, outcome) => {
            const i = ctx.delivery.wharf_index;
            if (i === undefined || outcomes[i] !== undefined) return;
            outcomes[i] = outcome;
            known++;
            progress.phase = 'sent ' + next + ' of ' + msgs.length + ', ' + known + ' outcomes';
            if (known === msgs.length) resolve({outcomes});
        };
        for (const ev of ['accepted', 'rejected', 'released', 'modified']) sender.on(ev, (ctx) => record(ctx, ev));
        // Settled with no outcome at all (the contract lists none for it).
        sender.on('settled', (ctx) => record(ctx, 'settled without outcome'));
        sender.on('sendable', () => {
            while (next < msgs.length && sender.sendable()) {
                const d = sender.send(msgs[next]);
                d.wharf_index = next++;
            }
            progress.phase = 'sent ' + next + ' of ' + msgs.length + ', ' + known + ' outcomes';
        });
        sender.on('sender_close', () => reject(linkFailure(sender)));
        if (msgs.length === 0) sender.on('sender_open', () => resolve({outcomes: []}));
    });
    return Promise.race([work, connectionFailed]);
}

function settle(delivery, what) {
    if (what === 'accept') delivery.accept();
    else if (what === 'reject') delivery.reject();
    else if (what === 'release') delivery.release();
    else delivery.modified({delivery_failed: true});
}

// rhea 3.0.5 batches the dispositions written in one tick (session.js
// write_dispositions) and, when the first two deliveries of a batch are
// consecutive, sends the second one with the FIRST one's outcome (the
// outcome check is skipped while first === last). Settling one delivery per
// event-loop turn (setImmediate runs after rhea's nextTick flush) puts each
// settlement in its own disposition frame, so every delivery gets its own outcome.
function oneAtATime() {
    const queue = [];
    let running = false;
    const step = () => {
        if (!queue.length) { running = false; return; }
        queue.shift()();
        setImmediate(step);
    };
    return (fn) => {
        queue.push(fn);
        if (!running) { running = true; setImmediate(step); }
    };
}

function receive(o, progress) {
    const conn = connect(o);
    progress.phase = 'attaching the receiver';
    // --selector: rhea's own helper (a 'jms-selector' filter, described by code 0x468C00000004).
    const source = {address: o.queue};
    if (o.selector !== undefined) source.filter = rhea.filter.selector(o.selector);
    const receiver = conn.open_receiver({source, credit_window: 0, autoaccept: false});
    const choose = C.makeOutcomeChooser(o.outcomes);
    const later = oneAtATime();
    const work = new Promise((resolve, reject) => {
        const messages = [];
        let counted = 0;
        let done = false;
        const finishReceive = () => {
            done = true;
            receiver.close();
            resolve({messages});
        };
        receiver.on('receiver_open', () => {
            progress.phase = 'received 0 of ' + o.count;
            if (o.count === 0) return finishReceive();
            receiver.add_credit(o.credit);
        });
        receiver.on('message', (ctx) => later(() => {
            // More than asked for (credit beyond N): give it back untouched.
            if (done) return ctx.delivery.release();
            const decoded = decodePayload(ctx.message.wharf_payload);
            messages.push(C.messageJSON(decoded));
            const what = choose(decoded);
            settle(ctx.delivery, what);
            if (what === 'accept' || what === 'reject') counted++;
            progress.phase = 'received ' + counted + ' of ' + o.count + ' (' + messages.length + ' deliveries)';
            if (counted >= o.count) return finishReceive();
            if (o.refill === 'each') receiver.add_credit(1);
            else if (o.credit - receiver.credit > 0) receiver.add_credit(o.credit - receiver.credit);
        }));
        receiver.on('receiver_close', () => { if (!done) reject(linkFailure(receiver)); });
    });
    return Promise.race([work, connectionFailed]);
}

function attach(o, progress) {
    const conn = connect(o);
    progress.phase = 'waiting for the peer\'s attach';
    const isSender = o.role === 'sender';
    const link = isSender ? conn.open_sender({target: {address: o.queue}}) :
        conn.open_receiver({source: {address: o.queue}, credit_window: 0, autoaccept: false});
    const prefix = isSender ? 'sender_' : 'receiver_';
    const work = new Promise((resolve) => {
        link.on(prefix + 'open', () => {
            progress.phase = 'attached, waiting 2 s for a detach';
            setTimeout(() => resolve({opened: true}), 2000);
        });
        link.on(prefix + 'close', () => resolve({detached: errorJSON(link.remote.detach && link.remote.detach.error)}));
    });
    return Promise.race([work, connectionFailed]);
}

// A receiver with a dynamic source, and a sender on TARGET (null: anonymous);
// sends MSG with reply_to = the dynamic address and resolves with the first reply.
function requestReply(o, progress, target, msg) {
    const conn = connect(o);
    progress.phase = 'attaching the dynamic receiver';
    const receiver = conn.open_receiver({source: {dynamic: true}, credit_window: 0, autoaccept: false});
    const work = new Promise((resolve, reject) => {
        let replyTo = null;
        receiver.on('receiver_open', () => {
            replyTo = receiver.source && receiver.source.address;
            if (!replyTo) return reject(new Error('the peer attached the dynamic receiver without an address'));
            receiver.add_credit(1);
            progress.phase = 'attaching the sender';
            const sender = conn.open_sender({target: {address: target}, treat_modified_as_released: false});
            let sent = false;
            sender.on('sendable', () => {
                if (sent) return;
                sent = true;
                msg.reply_to = replyTo;
                sender.send(msg);
                progress.phase = 'waiting for the reply';
            });
            for (const ev of ['rejected', 'released', 'modified']) {
                sender.on(ev, (ctx) => {
                    const err = ctx.delivery.remote_state && ctx.delivery.remote_state.error;
                    reject(new Error('the request was ' + ev + (err ? ': ' + err.condition + ' ' + err.description : '')));
                });
            }
            sender.on('sender_close', () => reject(linkFailure(sender)));
        });
        receiver.on('message', (ctx) => {
            ctx.delivery.accept();
            resolve({replyTo, reply: decodePayload(ctx.message.wharf_payload)});
        });
        receiver.on('receiver_close', () => reject(linkFailure(receiver)));
    });
    return Promise.race([work, connectionFailed]);
}

function request(o, progress) {
    const msgs = C.readMessages(o.file);
    if (msgs.length !== 1) throw new C.UsageError('request takes a file with exactly one message');
    const m = msgs[0];
    m.properties = Object.assign({}, m.properties, {to: o.queue});
    const msg = toRheaMessage(m);
    return requestReply(o, progress, null, msg).then((r) => ({reply_to: r.replyTo, reply: C.messageJSON(r.reply)}));
}

function mgmtQuery(o, progress) {
    const application_properties = {};
    for (const [k, v] of C.MGMT_PROPERTIES(o.entityType)) application_properties[k] = toRhea(v);
    const msg = {message_id: types.wrap_string('wharf-interop-mgmt-1'), application_properties, body: toRhea(C.MGMT_BODY)};
    return requestReply(o, progress, '$management', msg).then((r) => {
        const status = (r.reply.application_properties || []).find(([k]) => k === 'statusCode');
        const v = status ? status[1].v : null;
        return {
            status: typeof v === 'bigint' ? Number(v) : v,
            body: r.reply.body && r.reply.body.kind === 'value' ? C.typedJSON(r.reply.body.value) : null,
        };
    });
}

C.run({'send': send, 'receive': receive, 'attach': attach, 'request': request, 'mgmt-query': mgmtQuery},
    closeConnection);
