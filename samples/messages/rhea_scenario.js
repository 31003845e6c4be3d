// Request/reply between two rhea clients (another AMQP 1.0 stack than proton) through RabbitMQ.
// Run by samples/messages/other_stacks.py (NODE_PATH must find rhea); writes the truth JSON, what
// the clients themselves did and saw, to the file named by its first argument.
//
// Connection "amqp-dissect-rhea-service" consumes the service queue and answers each request on
// the reply queue with correlation_id = the request's message_id (same AMQP type); connection
// "amqp-dissect-rhea-client" sends N requests (message ids of the four AMQP id types) with
// reply_to the reply queue, and accepts the replies. Request 4 is answered twice (a duplicate
// reply with the same correlation id), request 5 is not answered. Then both connections close.
'use strict';
const fs = require('fs');
const rhea = require('rhea');
const debug = require('debug');

const out = process.argv[2];
const N = 6;
const SERVICE = '/queue/amqpdissect.rhea.service';
const REPLIES = '/queue/amqpdissect.rhea.replies';
const t0 = performance.timeOrigin;
const now = () => Math.round((t0 + performance.now()) * 1000) / 1e6; // epoch seconds, microseconds

// every frame the two connections write and read, from rhea's own frame log
const frames = {};
debug.enable('rhea:frames');
debug.log = (...args) => {
  const line = require('util').format(...args);
  const m = /\[(connection-\d+)\](?::(\d+))? (->|<-) (\w+)#/.exec(line) || /\[(connection-\d+)\](?::(\d+))? (->|<-) (empty)/.exec(line);
  if (!m) return;
  const f = frames[m[1]] = frames[m[1]] || {sent: [], received: []};
  (m[3] === '->' ? f.sent : f.received).push(`${m[4].replace(/_/g, '-')}:${m[2] || 0}`);
};

function idOf(i) {
  // the four AMQP message-id types, in turn
  switch (i % 4) {
    case 1: return {type: 'string', value: `rhea-req-${i}`, wire: `rhea-req-${i}`};
    case 2: return {type: 'ulong', value: 4200 + i, wire: rhea.types.wrap_ulong(4200 + i)};
    case 3: {
      const hex = `00000000000042004200${String(i).padStart(12, '0')}`;
      const b = Buffer.from(hex, 'hex');
      const s = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
      return {type: 'uuid', value: s, wire: rhea.types.wrap_uuid(b)};
    }
    default: {
      const b = Buffer.from([0x72, 0x68, 0x65, 0x61, i]);
      return {type: 'binary', value: b.toString('hex'), wire: rhea.types.wrap_binary(b)};
    }
  }
}
const typedOf = (wire, kind) => (wire === undefined ? null : kind);

const truth = {connections: [], links: [], notes: [], errors: []};
const links = {};
function linkRec(name, role, conn, address) {
  const r = {name, role, connection: conn, address, attached: false, detached_by: null, detach_error: null,
             messages_sent: 0, deliveries_received: 0,
             outcomes: {accepted: 0, rejected: 0, released: 0, modified: 0}, deliveries: []};
  links[name] = r;
  truth.links.push(r);
  return r;
}

const container = rhea.create_container({id: 'amqp-dissect-rhea'});
const opts = (cid) => ({host: '127.0.0.1', port: 5672, username: 'guest', password: 'guest', container_id: cid,
                        reconnect: false, idle_time_out: 0});
let svc, cli, svcIn, svcOut, cliIn, cliOut;
const byRequest = {};  // wire id kind by request number, to answer with the same type
let replies = 0, expectedReplies = 0, closing = false;

function connRec(conn, cid, role) {
  const r = {index: truth.connections.length, container_id: cid, role, server: '127.0.0.1:5672', sasl_mechanism: 'PLAIN',
             t_connect: now(), t_remote_open: null, t_closed: null, closed_by: null, connection_error: null,
             remote_container_id: null, session_errors: []};
  truth.connections.push(r);
  conn._rec = r;
  return r;
}

function start() {
  svc = container.connect(opts('amqp-dissect-rhea-service'));
  connRec(svc, 'amqp-dissect-rhea-service', 'service');
  svcIn = svc.open_receiver({name: 'rhea-service-in', source: SERVICE, autoaccept: false, credit_window: N});
  linkRec('rhea-service-in', 'receiver', 0, SERVICE);
  svcOut = svc.open_sender({name: 'rhea-service-replies', target: REPLIES});
  linkRec('rhea-service-replies', 'sender', 0, REPLIES);
}

function startClient() {
  cli = container.connect(opts('amqp-dissect-rhea-client'));
  connRec(cli, 'amqp-dissect-rhea-client', 'client');
  cliIn = cli.open_receiver({name: 'rhea-client-replies', source: REPLIES, autoaccept: false, credit_window: N + 2});
  linkRec('rhea-client-replies', 'receiver', 1, REPLIES);
  cliOut = cli.open_sender({name: 'rhea-client-requests', target: SERVICE});
  linkRec('rhea-client-requests', 'sender', 1, SERVICE);
}

container.on('connection_open', (ctx) => {
  const r = ctx.connection._rec;
  r.t_remote_open = now();
  r.remote_container_id = ctx.connection.remote.open.container_id;
});
container.on('receiver_open', (ctx) => { links[ctx.receiver.name].attached = true; maybeClient(); });
container.on('sender_open', (ctx) => { links[ctx.sender.name].attached = true; maybeClient(); });
let clientStarted = false;
function maybeClient() {
  if (!clientStarted && links['rhea-service-in'].attached && links['rhea-service-replies'].attached) {
    clientStarted = true;
    startClient();
  }
}

let sent = 0;
container.on('sendable', (ctx) => {
  if (ctx.sender !== cliOut) return;
  while (cliOut.sendable() && sent < N) {
    sent += 1;
    const id = idOf(sent);
    byRequest[sent] = id;
    const msg = {message_id: id.wire, reply_to: REPLIES, to: SERVICE, subject: 'rhea.request',
                 application_properties: {n: sent, id_type: id.type}, body: `rhea request ${sent}`};
    const d = cliOut.send(msg);
    const rec = links['rhea-client-requests'];
    rec.messages_sent += 1;
    const row = {message_id: {type: id.type, value: id.value}, correlation_id: null, subject: msg.subject,
                 reply_to: REPLIES, to: SERVICE, application_properties: msg.application_properties,
                 delivery_tag: Buffer.from(d.tag).toString('hex'), t_sent: now(), outcome: null, t_outcome: null};
    rec.deliveries.push(row);
    d._row = row;
  }
});

function outcomeOf(ctx) {
  return ctx.delivery.remote_state && ctx.delivery.remote_state.constructor
    ? {accepted: 'accepted', rejected: 'rejected', released: 'released', modified: 'modified'}[ctx.type] : ctx.type;
}
for (const ev of ['accepted', 'rejected', 'released', 'modified']) {
  container.on(ev, (ctx) => {
    const row = ctx.delivery._row;
    if (!row || row.outcome) return;
    row.outcome = ev;
    row.t_outcome = now();
    links[ctx.sender.name].outcomes[ev] += 1;
  });
}

const sendReply = [];
container.on('message', (ctx) => {
  const m = ctx.message;
  const rec = links[ctx.receiver.name];
  rec.deliveries_received += 1;
  const props = m.application_properties || {};
  const row = {message_id: null, correlation_id: null, subject: m.subject || null, reply_to: m.reply_to || null,
               to: m.to || null, application_properties: props,
               header: {durable: !!m.durable, priority: m.priority === undefined ? null : m.priority,
                        first_acquirer: m.first_acquirer === undefined ? null : m.first_acquirer,
                        delivery_count: m.delivery_count === undefined ? null : m.delivery_count},
               delivery_tag: Buffer.from(ctx.delivery.tag).toString('hex'), t_received: now(),
               outcome: 'accepted', t_settled: null};
  rec.deliveries.push(row);
  if (ctx.receiver === svcIn) {
    const n = props.n;
    const id = byRequest[n] || null;
    row.message_id = id ? {type: id.type, value: id.value} : null;
    ctx.delivery.accept();
    row.t_settled = now();
    rec.outcomes.accepted += 1;
    if (n === 5) {
      row.answered = 0;
      truth.notes.push('request 5 was accepted by the service and deliberately never answered');
      return;
    }
    const times = n === 4 ? 2 : 1;
    row.answered = times;
    if (n === 4) truth.notes.push('request 4 was answered twice (two replies with the same correlation id)');
    for (let k = 1; k <= times; k++) {
      const rid = `rhea-reply-${n}` + (k > 1 ? `-dup${k}` : '');
      sendReply.push({message_id: rid, correlation_id: id.wire, to: m.reply_to, subject: 'rhea.reply',
                      application_properties: {n, copy: k}, body: `rhea reply ${n}`,
                      _truth: {message_id: {type: 'string', value: rid}, correlation_id: {type: id.type, value: id.value}}});
      expectedReplies += 1;
    }
    flushReplies();
  } else {
    const n = props.n;
    const req = byRequest[n];
    row.message_id = {type: 'string', value: String(m.message_id)};
    row.correlation_id = req ? {type: req.type, value: req.value} : null;
    ctx.delivery.accept();
    row.t_settled = now();
    rec.outcomes.accepted += 1;
    replies += 1;
    if (replies === N) setTimeout(closeAll, 300);
  }
});

function flushReplies() {
  while (svcOut.sendable() && sendReply.length) {
    const msg = sendReply.shift();
    const t = msg._truth;
    delete msg._truth;
    const d = svcOut.send(msg);
    const rec = links['rhea-service-replies'];
    rec.messages_sent += 1;
    const row = {message_id: t.message_id, correlation_id: t.correlation_id, subject: msg.subject, to: msg.to,
                 reply_to: null, application_properties: msg.application_properties,
                 delivery_tag: Buffer.from(d.tag).toString('hex'), t_sent: now(), outcome: null, t_outcome: null};
    rec.deliveries.push(row);
    d._row = row;
  }
}
container.on('sendable', (ctx) => { if (ctx.sender === svcOut) flushReplies(); });

function closeAll() {
  if (closing) return;
  closing = true;
  for (const c of [cli, svc]) {
    if (c && c._rec.closed_by === null) c._rec.closed_by = 'client';
    if (c) c.close();
  }
}
container.on('connection_close', (ctx) => {
  const r = ctx.connection._rec;
  if (r.closed_by === null) r.closed_by = 'broker';
  if (ctx.connection.error) r.connection_error = {condition: ctx.connection.error.condition, description: ctx.connection.error.description};
});
container.on('session_close', (ctx) => {
  const e = ctx.session.error;
  if (e) ctx.connection._rec.session_errors.push({condition: e.condition, description: e.description});
});
container.on('error', (ctx) => truth.errors.push(String(ctx.error && ctx.error.message || ctx.error)));
let closed = 0;
container.on('disconnected', (ctx) => {
  const r = ctx.connection._rec;
  if (r.t_closed === null) { r.t_closed = now(); closed += 1; }
  if (ctx.error) truth.errors.push(String(ctx.error.message || ctx.error));
  if (closed === 2 || (closed === 1 && !cli)) finish();
});
container.on('connection_close', (ctx) => { const r = ctx.connection._rec; if (r.t_closed === null) { r.t_closed = now(); closed += 1; } if (closed === 2) finish(); });

let finished = false;
function finish() {
  if (finished) return;
  finished = true;
  setTimeout(() => {
    truth.expected_replies = expectedReplies;
    const names = Object.keys(frames).sort();
    truth.connections.forEach((c, i) => {
      const f = frames[names[i]] || {sent: [], received: []};
      c.frames_sent = f.sent;
      c.frames_received = f.received;
      const count = (l) => l.reduce((a, x) => { const k = x.split(':')[0]; a[k] = (a[k] || 0) + 1; return a; }, {});
      c.frame_counts_sent = count(f.sent);
      c.frame_counts_received = count(f.received);
    });
    truth.rhea_version = require('rhea/package.json').version;
    truth.node_version = process.version;
    fs.writeFileSync(out, JSON.stringify(truth, null, 1) + '\n');
    process.exit(0);
  }, 100);
}
setTimeout(() => { truth.notes.push('timed out'); closeAll(); setTimeout(finish, 1000); }, 15000);
start();
