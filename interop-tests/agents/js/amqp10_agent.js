#!/usr/bin/env node
'use strict';
// Interop agent for amqp10 3.6.0 (see ../CONTRACT.md and README.md).
//
// Encoding uses amqp10's explicit type wrappers (amqp10.Type.*, its AMQPArray
// for arrays). Decoding: amqp10's codec turns every value into a plain JS
// value (a Number for every numeric type, a String for string, symbol, char
// and uuid, an Array for list and array, an Object for map), so the agent
// prints the closest AMQP type for the JS value it was given and never
// guesses from the value. Message sections are read with amqp10's codec from
// the transfer frame that amqp10 passes with each 'message' event, because
// its decodeMessage folds one data section into a Buffer and one
// amqp-sequence section into an Array, which would hide the body's kind.

const amqp = require('amqp10');
const Int64 = require('node-int64');
const codec = require('amqp10/lib/codec');
const AMQPArray = require('amqp10/lib/types/amqp_composites').Array;
const DescribedType = require('amqp10/lib/types/described_type');
const DeliveryState = require('amqp10/lib/types/delivery_state');
const C = require('./common');

const T = amqp.Type;

// ---- neutral typed value -> amqp10 -------------------------------------------

const NO_DECIMAL = 'amqp10 cannot encode decimal32/64/128: types.js registers them with no encoder ' +
    '(NotImplementedError "not yet implemented")';
const NO_CHAR = 'amqp10 cannot encode char: the 0x73 encoder writes the 0x73 constructor itself and the ' +
    'char type writes it again (73 73 ...), and it takes charCodeAt(0), a UTF-16 unit';

function int64(v, signed) {
    return new Int64(C.big64(v, signed));
}

function toAmqp10(tv) {
    const v = tv.v;
    switch (tv.t) {
    case 'null': return T.null(null);
    case 'boolean': return T.boolean(v);
    case 'ubyte': return T.ubyte(v);
    case 'ushort': return T.ushort(v);
    case 'uint': return T.uint(v);
    case 'byte': return T.byte(v);
    case 'short': return T.short(v);
    case 'int': return T.int(v);
    case 'ulong':
        // The ulong encoder picks its encoding from Int64.toNumber(true), a
        // signed reading: values >= 2^63 come out negative and fail.
        if (v >= (1n << 63n)) throw new C.Unsupported('amqp10 cannot encode ulong >= 2^63: its ulong encoder reads node-int64 values as signed and throws');
        // Small values as a Number (the 0x53/0x44 encoders write Numbers only), the rest as exact 8 bytes.
        return v <= 0xffn ? T.ulong(Number(v)) : T.ulong(int64(v, false));
    case 'long': return v > -0x80n && v < 0x80n ? T.long(Number(v)) : T.long(int64(v, true));
    case 'timestamp': return T.timestamp(int64(v, true));
    case 'float': return T.float(v);
    case 'double': return T.double(v);
    case 'decimal32': case 'decimal64': case 'decimal128': throw new C.Unsupported(NO_DECIMAL);
    case 'char': throw new C.Unsupported(NO_CHAR);
    case 'uuid': return T.uuid(C.uuidString(v));
    case 'binary': return T.binary(v);
    case 'string': return T.string(v);
    case 'symbol': return T.symbol(v);
    case 'list': return T.list(v.map(toAmqp10));
    case 'map': return mapToAmqp10(v, false);
    case 'array':
        if (v.values.length === 0) {
            throw new C.Unsupported('amqp10 cannot encode an empty array: arrayBuilder writes null (0x40) for one');
        }
        return T.array(arrayToAmqp10(v));
    }
    throw new Error('cannot encode type ' + tv.t);
}

// amqp10 encodes a map from a JS object: keys become strings ('map') or
// symbols ('fields'), in the object's key order.
function mapToAmqp10(pairs, stringKeysOnly) {
    const keyType = pairs.length ? pairs[0][0].t : 'string';
    if (!pairs.every(([k]) => k.t === keyType) || (keyType !== 'string' && (stringKeysOnly || keyType !== 'symbol'))) {
        throw new C.Unsupported('amqp10 cannot encode this map: it encodes maps from JS objects, so keys are all ' +
            'strings (or all symbols via Type.fields' + (stringKeysOnly ? ', not inside arrays' : '') + '), got ' +
            pairs.map(([k]) => k.t).join(', '));
    }
    const obj = {};
    for (const [k, x] of pairs) {
        if (Object.prototype.hasOwnProperty.call(obj, k.v)) throw new C.Unsupported('amqp10 cannot encode a map with a repeated key');
        obj[k.v] = toAmqp10(x);
    }
    const order = Object.keys(obj);
    if (order.some((k, i) => k !== pairs[i][0].v)) {
        throw new C.Unsupported('amqp10 cannot keep this map\'s key order: JS objects list integer-like keys first');
    }
    return stringKeysOnly ? obj : keyType === 'symbol' ? T.fields(obj) : T.map(obj);
}

const ARRAY_CODES = {
    null: 0x40, boolean: 0x56, ubyte: 0x50, ushort: 0x60, uint: 0x70, ulong: 0x80, byte: 0x51,
    short: 0x61, int: 0x71, long: 0x81, float: 0x72, double: 0x82, timestamp: 0x83, uuid: 0x98,
    binary: 0xb0, string: 0xb1, symbol: 0xb3, list: 0xd0, map: 0xd1, array: 0xf0,
};

// An AMQPArray with a numeric element code: amqp10 then writes the code once
// and each element with that encoding's own encoder (raw values, not Types).
function arrayToAmqp10(a) {
    if (a.element === 'char') throw new C.Unsupported(NO_CHAR);
    if (/^decimal/.test(a.element)) throw new C.Unsupported(NO_DECIMAL);
    const values = a.values.map((e) => {
        switch (e.t) {
        case 'ulong': return C.big64(e.v, false);
        case 'long': return C.big64(e.v, true);
        case 'timestamp': return int64(e.v, true);
        case 'uuid': return C.uuidString(e.v);
        case 'list': return e.v.map(toAmqp10);
        case 'map': return mapToAmqp10(e.v, true);
        case 'array': return arrayToAmqp10(e.v);
        default: return e.v;
        }
    });
    return new AMQPArray(values, ARRAY_CODES[a.element]);
}

function toAmqp10Message(m) {
    const msg = {};
    if (m.header) {
        // Without a value the header's composite fills in the defaults
        // (durable false, priority 4, ...): a Type.null keeps an unset field unset.
        const h = m.header;
        const opt = (k, f) => (h[k] === undefined ? T.null(null) : f(h[k]));
        msg.header = {durable: opt('durable', T.boolean), priority: opt('priority', T.ubyte), ttl: opt('ttl', T.uint),
            firstAcquirer: opt('first_acquirer', T.boolean), deliveryCount: opt('delivery_count', T.uint)};
    }
    if (m.properties) {
        const p = m.properties;
        const props = {};
        const set = (name, k, f) => { if (p[k] !== undefined) props[name] = f(p[k]); };
        set('messageId', 'message_id', toAmqp10);
        set('userId', 'user_id', T.binary);
        set('to', 'to', T.string);
        set('subject', 'subject', T.string);
        set('replyTo', 'reply_to', T.string);
        set('correlationId', 'correlation_id', toAmqp10);
        set('contentType', 'content_type', T.symbol);
        set('contentEncoding', 'content_encoding', T.symbol);
        set('absoluteExpiryTime', 'absolute_expiry_time', (v) => T.timestamp(int64(v, true)));
        set('creationTime', 'creation_time', (v) => T.timestamp(int64(v, true)));
        set('groupId', 'group_id', T.string);
        set('groupSequence', 'group_sequence', T.uint);
        set('replyToGroupId', 'reply_to_group_id', T.string);
        msg.properties = props;
    }
    if (m.application_properties) {
        msg.applicationProperties = {};
        for (const [k, v] of m.application_properties) msg.applicationProperties[k] = toAmqp10(v);
    }
    // SenderLink.send takes an object with an own 'body' property as the
    // message; an undefined body sends no body section.
    msg.body = undefined;
    const b = m.body;
    if (b && b.sections && b.sections.length > 1) {
        throw new C.Unsupported('amqp10 cannot send more than one ' + b.kind + ' section (message.js encodeMessage ' +
            'writes one body section; its @todo for several)');
    }
    if (b && b.kind === 'value') msg.body = toAmqp10(b.value);
    else if (b && b.kind === 'data') msg.body = b.sections[0]; // a Buffer body is one data section
    else if (b && b.kind === 'sequence') msg.body = b.sections[0].map(toAmqp10); // an Array body is one amqp-sequence
    return msg;
}

// ---- amqp10 (plain JS) -> neutral typed value --------------------------------

function fromAmqp10(x) {
    if (x === null || x === undefined) return {t: 'null', v: null};
    if (typeof x === 'boolean') return {t: 'boolean', v: x};
    // Every numeric AMQP type arrives as a JS Number, i.e. an IEEE double.
    if (typeof x === 'number') return {t: 'double', v: x};
    if (typeof x === 'string') return {t: 'string', v: x};
    if (Buffer.isBuffer(x)) return {t: 'binary', v: x};
    if (x instanceof Date) return {t: 'timestamp', v: Number.isNaN(x.getTime()) ? null : BigInt(x.getTime())};
    // node-int64's Int64 (a signed 64-bit value) is what amqp10 gives for
    // ulong/long values it cannot hold exactly in a Number.
    if (x instanceof Int64) return {t: 'long', v: x.buffer.readBigInt64BE(x.offset)};
    if (Array.isArray(x)) return {t: 'list', v: x.map(fromAmqp10)};
    if (x instanceof DescribedType) return {t: 'described', v: {descriptor: fromAmqp10(x.descriptor), value: fromAmqp10(x.value)}};
    return {t: 'map', v: Object.keys(x).map((k) => [{t: 'string', v: k}, fromAmqp10(x[k])])};
}

const SECTIONS = {'amqp:header:list': 0x70, 'amqp:properties:list': 0x73, 'amqp:application-properties:map': 0x74,
    'amqp:data:binary': 0x75, 'amqp:amqp-sequence:list': 0x76, 'amqp:value:*': 0x77};

function decodePayload(payload) {
    const buffer = Buffer.isBuffer(payload) ? payload : payload.slice(); // a BufferList when multi-frame
    const d = {};
    for (let offset = 0; offset < buffer.length;) {
        const r = codec.decode(buffer, offset);
        if (!r) throw new Error('amqp10 could not decode the message at byte ' + offset);
        offset += r[1];
        const s = r[0];
        const code = typeof s.descriptor === 'number' ? s.descriptor : SECTIONS[s.descriptor];
        if (code === 0x70 || code === 0x73) {
            const names = code === 0x70 ? C.HEADER_FIELDS : C.PROPERTY_FIELDS;
            const fields = {};
            (s.value || []).forEach((v, i) => {
                if (i >= names.length || v === null || v === undefined) return;
                const name = names[i];
                if (name === 'message_id' || name === 'correlation_id') fields[name] = fromAmqp10(v);
                else if (name === 'absolute_expiry_time' || name === 'creation_time') fields[name] = fromAmqp10(v).v;
                else fields[name] = v instanceof Int64 ? Number(fromAmqp10(v).v) : v;
            });
            d[code === 0x70 ? 'header' : 'properties'] = fields;
        } else if (code === 0x74) {
            d.application_properties = Object.keys(s.value).map((k) => [k, fromAmqp10(s.value[k])]);
        } else if (code === 0x75) {
            if (!d.body) d.body = {kind: 'data', sections: []};
            d.body.sections.push(s.value);
        } else if (code === 0x76) {
            if (!d.body) d.body = {kind: 'sequence', sections: []};
            d.body.sections.push(s.value.map(fromAmqp10));
        } else if (code === 0x77) {
            d.body = {kind: 'value', value: fromAmqp10(s.value)};
        }
    }
    return d;
}

// ---- connection plumbing ------------------------------------------------------

let client = null;
let connectionFailed = null;

function errorText(e) {
    if (!e) return 'unknown';
    return [e.condition, e.description || e.message].filter(Boolean).join(' ') || String(e);
}

function connect(o) {
    const policy = amqp.Policy.merge({
        reconnect: null,
        defaultSubjects: false, // else 'a/b' would be address 'a' with a subject filter 'b'
        connect: {saslMechanism: o.sasl === 'anonymous' ? 'ANONYMOUS' : 'NONE'},
        // Transfers on this session are then numbered 0, 1, ... (see send).
        session: {options: {nextOutgoingId: 0}},
        // Unsettled (at-least-once) sends whose promise waits for the outcome.
        senderLink: {attach: {sndSettleMode: 0}, callback: 'settled'},
        // Manual settlement: amqp10 only stops auto-accepting when rcvSettleMode
        // is 1, which it also puts in the attach (rcv-settle-mode second). Its
        // default maxMessageSize (10000 bytes) would refuse big messages; 0 = no limit.
        // Credit is granted by the agent, not by a policy.
        receiverLink: {attach: {rcvSettleMode: 1, maxMessageSize: 0}, credit: function () {}},
    });
    client = new amqp.Client(policy);
    connectionFailed = new Promise((resolve, reject) => {
        let last = null;
        // Link errors arrive here too (a refused attach is an answer for the
        // attach command): the command's own link handlers get 500 ms to act first.
        client.on('client:errorReceived', (e) => {
            last = e;
            setTimeout(() => reject(new Error('amqp10 error: ' + errorText(e))), 500);
        });
        client.on('connection:closed', () => reject(new Error('disconnected' + (last ? ' after ' + errorText(last) : ''))));
    });
    const url = 'amqp://' + (o.host.includes(':') ? '[' + o.host + ']' : o.host) + ':' + o.port;
    return Promise.race([client.connect(url), connectionFailed]);
}

function closeConnection() {
    if (!client) return null;
    return Promise.race([client.disconnect(), new Promise((resolve) => setTimeout(resolve, 1000))]);
}

function detachJSON(link) {
    const e = link.remote.detach && link.remote.detach.error;
    if (!e) return {condition: null, description: null, info: null};
    // amqp10's error composite fills an absent info with {} (its default), so
    // an empty map and no info look the same here.
    return {condition: e.condition || null, description: e.description || null,
        info: e.info === null || e.info === undefined ? null : C.typedJSON(fromAmqp10(e.info))};
}

function classifyError(e) {
    // What amqp10's codec throws when a received message holds a type it
    // cannot decode (the decimals: "not yet implemented").
    if (e instanceof amqp.Errors.NotImplementedError) {
        // e.g. "116 not yet implemented": 116 is the type code (0x74, decimal32).
        const m = /^(\d+) /.exec(e.message || '');
        const code = m ? ' (type code 0x' + Number(m[1]).toString(16) + ')' : '';
        return new C.Unsupported('amqp10 cannot decode a value: ' + e.message + code);
    }
    if (e instanceof amqp.Errors.MalformedPayloadError) return new Error('amqp10 could not decode a delivery: ' + e.message);
    return e;
}

// ---- commands -----------------------------------------------------------------

function outcomeName(state) {
    if (state instanceof DeliveryState.Accepted) return 'accepted';
    if (state instanceof DeliveryState.Rejected) return 'rejected';
    if (state instanceof DeliveryState.Released) return 'released';
    if (state instanceof DeliveryState.Modified) return 'modified';
    return null;
}

function send(o, progress) {
    const msgs = C.readMessages(o.file).map(toAmqp10Message);
    progress.phase = 'connecting';
    const work = connect(o).then(() => {
        progress.phase = 'attaching the sender';
        return client.createSender(o.queue);
    }).then((sender) => {
        progress.phase = 'sending';
        // The send promise rejects for 'rejected' and for link failures alike;
        // the outcome itself comes from the session's disposition events. This
        // link is the only sender on the session, whose transfers are numbered
        // from 0 (nextOutgoingId above), so message i has delivery id i.
        const outcomes = new Array(msgs.length);
        sender.session.on('disposition', (d) => {
            if (!d.settled) return;
            for (let id = d.first; id <= d.last; id++) {
                if (id < msgs.length && outcomes[id] === undefined) outcomes[id] = outcomeName(d.state) || 'settled without outcome';
            }
        });
        return Promise.all(msgs.map((m, i) => sender.send(m).then(() => null, (e) => {
            if (outcomes[i] === undefined) throw new Error('sending message ' + i + ' failed: ' + errorText(e));
        }).then(() => { progress.phase = 'sent, waiting for outcomes'; }))).then(() => ({outcomes}));
    });
    return Promise.race([work, connectionFailed]);
}

function settle(link, message, what) {
    if (what === 'accept') link.accept(message);
    else if (what === 'reject') link.reject(message);
    else if (what === 'release') link.release(message);
    else link.modify(message, {deliveryFailed: true});
}

function receive(o, progress) {
    const choose = C.makeOutcomeChooser(o.outcomes);
    const work = connect(o).then(() => {
        progress.phase = 'attaching the receiver';
        if (o.selector === undefined) return client.createReceiver(o.queue);
        // --selector: amqp10 has no helper; a filter-set entry described by
        // the selector filter's symbol, built with its translator.
        const filter = {'jms-selector': amqp.translator(
            ['described', ['symbol', 'apache.org:selector-filter:string'], ['string', o.selector]])};
        return client.createReceiver(o.queue, {attach: {source: {filter}}});
    }).then((link) => new Promise((resolve, reject) => {
        const messages = [];
        let counted = 0;
        let done = false;
        progress.phase = 'received 0 of ' + o.count;
        if (o.count === 0) return resolve({messages});
        link.on('message', (message, frame) => {
            // More than asked for (credit beyond N): give it back untouched.
            if (done) return link.release(message);
            const decoded = decodePayload(frame.payload);
            messages.push(C.messageJSON(decoded));
            const what = choose(decoded);
            settle(link, message, what);
            if (what === 'accept' || what === 'reject') counted++;
            progress.phase = 'received ' + counted + ' of ' + o.count + ' (' + messages.length + ' deliveries)';
            if (counted >= o.count) {
                done = true;
                return resolve({messages});
            }
            if (o.refill === 'each') link.addCredits(1);
            else if (o.credit - link.linkCredit > 0) link.addCredits(o.credit - link.linkCredit);
        });
        link.on('detached', (info) => {
            if (!done) reject(new Error('link detached by the peer: ' + errorText(info && info.error)));
        });
        link.addCredits(o.credit);
    }));
    return Promise.race([work, connectionFailed]);
}

function attach(o, progress) {
    const work = connect(o).then(() => {
        progress.phase = 'waiting for the peer\'s attach';
        return o.role === 'sender' ? client.createSender(o.queue) : client.createReceiver(o.queue);
    }).then((link) => new Promise((resolve) => {
        // The detach may already have been processed with the attach.
        if (link.remote.detach) return resolve({detached: detachJSON(link)});
        progress.phase = 'attached, waiting 2 s for a detach';
        link.on('detached', () => resolve({detached: detachJSON(link)}));
        setTimeout(() => resolve({opened: true}), 2000);
    }));
    return Promise.race([work, connectionFailed]);
}

// A receiver with a dynamic source and a sender to TARGET (null = an anonymous
// sender); sends MSG with reply_to = the dynamic address; resolves with the first reply.
function requestReply(o, progress, target, msg) {
    let replyTo = null;
    const work = connect(o).then(() => {
        progress.phase = 'attaching the dynamic receiver';
        return client.createReceiver('', {attach: {source: {address: null, dynamic: true}}});
    }).then((receiver) => {
        replyTo = receiver.remote.attach && receiver.remote.attach.source && receiver.remote.attach.source.address;
        if (!replyTo) throw new Error('the peer attached the dynamic receiver without an address');
        const reply = new Promise((resolve, reject) => {
            receiver.on('message', (message, frame) => {
                receiver.accept(message);
                resolve(decodePayload(frame.payload));
            });
            receiver.on('detached', (info) => reject(new Error('reply link detached: ' + errorText(info && info.error))));
        });
        receiver.addCredits(1);
        progress.phase = 'attaching the sender';
        return client.createSender(target || '', {attach: {target: {address: target}}}).then((sender) => {
            msg.properties = Object.assign(msg.properties || {}, {replyTo: T.string(replyTo)});
            progress.phase = 'waiting for the reply';
            const sent = sender.send(msg).then((state) => {
                const name = outcomeName(state);
                if (name !== 'accepted') throw new Error('the request was ' + name);
                return new Promise(() => {}); // then wait for the reply
            }, (e) => { throw new Error('the request failed: ' + errorText(e)); });
            return Promise.race([reply, sent]);
        });
    }).then((reply) => ({replyTo, reply}));
    return Promise.race([work, connectionFailed]);
}

function request(o, progress) {
    const msgs = C.readMessages(o.file);
    if (msgs.length !== 1) throw new C.UsageError('request takes a file with exactly one message');
    const m = msgs[0];
    m.properties = Object.assign({}, m.properties, {to: o.queue});
    const msg = toAmqp10Message(m);
    return requestReply(o, progress, null, msg).then((r) => ({reply_to: r.replyTo, reply: C.messageJSON(r.reply)}));
}

function mgmtQuery(o, progress) {
    const applicationProperties = {};
    for (const [k, v] of C.MGMT_PROPERTIES(o.entityType)) applicationProperties[k] = toAmqp10(v);
    const msg = {properties: {messageId: T.string('wharf-interop-mgmt-1')}, applicationProperties, body: toAmqp10(C.MGMT_BODY)};
    return requestReply(o, progress, '$management', msg).then((r) => {
        const status = (r.reply.application_properties || []).find(([k]) => k === 'statusCode');
        const v = status ? status[1].v : null;
        return {
            status: typeof v === 'bigint' ? Number(v) : v,
            body: r.reply.body && r.reply.body.kind === 'value' ? C.typedJSON(r.reply.body.value) : null,
        };
    });
}

C.run({'send': send, 'receive': receive, 'attach': attach, 'request': request, 'mgmt-query': mgmtQuery,
    classifyError}, closeConnection);
