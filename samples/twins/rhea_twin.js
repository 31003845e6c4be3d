// The twin scenario's client written with rhea (run by make_twins.py); the numbers mirror twin_plan.py.
// Usage: node rhea_twin.js HOST PORT QUEUE_ADDRESS TRUTH_OUT [--modified] [--anonymous]
// One connection (max-frame-size 512, SASL PLAIN guest/guest), one session, three links attached at once:
// twin-sender (small messages), twin-big-sender (3000-byte bodies) and twin-receiver, all on one queue.
// The receiver grants credit in windows (500, then 10, then 1; a new window only when the credit is used
// up), at window 1 releases every 25th first-time small message and big messages 3 and 9 (then accepts the
// redelivery); with --modified every 70th first-time small message is settled modified(delivery-failed).
// The truth file lists what this client sent, received and settled, never anything read from a capture.
// --anonymous logs in with SASL ANONYMOUS; a delivery the broker sent settled has no outcome (null): it
// is settled locally only, never released nor redelivered (the Proton C example broker settles all it sends).
'use strict';
const fs = require('fs');
const rhea = require('rhea');

const [host, port, address, out] = process.argv.slice(2, 6);
const useModified = process.argv.slice(6).includes('--modified');
const anonymous = process.argv.slice(6).includes('--anonymous');
const N_SMALL = 1500, N_BIG = 12, BIG_SIZE = 3000, MAX_FRAME_SIZE = 512;
const WINDOWS = [[800, 500], [1100, 10]], ONE_BY_ONE_FROM = 1100;
const RELEASE_EVERY = 25, MODIFY_EVERY = 70, BIG_RELEASED = [3, 9];

function windowFor(received) {
  for (const [below, credit] of WINDOWS) if (received < below) return credit;
  return 1;
}
function messageFor(link, i) {
  if (link === 'twin-sender') return [`twin-small-${i}`, Buffer.from(`twin ${i}`)];
  const body = Buffer.alloc(BIG_SIZE);
  for (let k = 0; k < BIG_SIZE; k++) body[k] = (i * 7 + k) & 0xff;
  return [`twin-big-${i}`, body];
}
function receiverOutcome(mid, redelivered, receivedBefore) {
  // only at credit window 1: rhea merges the dispositions of adjacent deliveries into one range
  // with the first one's outcome, so a delivery with another outcome is settled alone
  if (redelivered || receivedBefore < ONE_BY_ONE_FROM) return 'accepted';
  const n = parseInt(mid.split('-').pop(), 10);
  if (mid.includes('-big-')) return BIG_RELEASED.includes(n) ? 'released' : 'accepted';
  if (useModified && n % MODIFY_EVERY === 0) return 'modified';
  return n % RELEASE_EVERY === 0 ? 'released' : 'accepted';
}
const outcomesZero = () => ({accepted: 0, rejected: 0, released: 0, modified: 0});
const truth = {
  client_stack: `rhea ${require('rhea/package.json').version} on node ${process.version}`,
  server: `${host}:${port}`, address, sasl_mechanism: anonymous ? 'ANONYMOUS' : 'PLAIN', max_frame_size_requested: MAX_FRAME_SIZE,
  connections: [{index: 0, t_connect: Date.now() / 1000, t_closed: null}],
  links: ['twin-sender', 'twin-big-sender', 'twin-receiver'].map((name) => ({
    name, role: name === 'twin-receiver' ? 'receiver' : 'sender', session: 0, messages_sent: 0,
    deliveries_received: 0, credit_grants: [], outcomes: outcomesZero(), deliveries: []})),
  notes: [],
};
const rec = Object.fromEntries(truth.links.map((l) => [l.name, l]));
const container = rhea.create_container({id: 'amqp-dissect-twins-rhea'});
const login = anonymous ? {} : {username: 'guest', password: 'guest'};
const conn = container.connect({host, port: Number(port), ...login, max_frame_size: MAX_FRAME_SIZE, reconnect: false});
const ssn = conn.create_session();
ssn.begin();
const senders = {
  'twin-sender': ssn.open_sender({name: 'twin-sender', target: {address}, autosettle: true}),
  'twin-big-sender': ssn.open_sender({name: 'twin-big-sender', target: {address}, autosettle: true}),
};
const rcv = ssn.open_receiver({name: 'twin-receiver', source: {address}, credit_window: 0, autoaccept: false});
const seen = new Set(), accepted = new Set();
let done = false;

function grant() {
  const n = windowFor(rec['twin-receiver'].deliveries_received);
  rec['twin-receiver'].credit_grants.push(n);
  rcv.add_credit(n);
}
grant();

function pump(sender) {
  const name = sender.name, r = rec[name], total = name === 'twin-sender' ? N_SMALL : N_BIG;
  // the big messages go after the small ones: they arrive at credit window 1
  if (name === 'twin-big-sender' && rec['twin-sender'].messages_sent < N_SMALL) return;
  while (sender.sendable() && r.messages_sent < total) {
    const [mid, body] = messageFor(name, r.messages_sent + 1);
    const d = sender.send({message_id: mid, body: rhea.message.data_section(body)});
    d.twin_index = r.messages_sent;
    r.messages_sent += 1;
    r.deliveries.push({message_id: mid, body_size: body.length, outcome: null});
  }
  if (name === 'twin-sender' && r.messages_sent === total) pump(senders['twin-big-sender']);
}
container.on('sendable', (ctx) => pump(ctx.sender));
for (const outcome of ['accepted', 'released', 'rejected', 'modified']) {
  container.on(outcome, (ctx) => {
    const r = rec[ctx.sender.name];
    r.deliveries[ctx.delivery.twin_index].outcome = outcome;
    r.outcomes[outcome] += 1;
  });
}
container.on('message', (ctx) => {
  const r = rec['twin-receiver'], d = ctx.delivery, mid = String(ctx.message.message_id);
  const redelivered = seen.has(mid);
  seen.add(mid);
  const outcome = d.remote_settled ? null : receiverOutcome(mid, redelivered, r.deliveries_received);
  r.deliveries_received += 1;
  const body = ctx.message.body && ctx.message.body.content ? ctx.message.body.content : ctx.message.body;
  r.deliveries.push({message_id: mid, delivery_tag: Buffer.from(d.tag).toString('hex'),
    body_size: body ? body.length : null, redelivered, outcome});
  if (outcome) r.outcomes[outcome] += 1;
  if (outcome === null) accepted.add(mid);
  else if (outcome === 'accepted') { d.accept(); accepted.add(mid); }
  else if (outcome === 'released') d.release();
  else d.modified({delivery_failed: true});
  if (accepted.size === N_SMALL + N_BIG) finish();
  else if (rcv.credit === 0) grant();
});
function finish() {
  if (done) return;
  done = true;
  senders['twin-sender'].close();
  senders['twin-big-sender'].close();
  rcv.close();
  ssn.close();
  conn.close();
}
container.on('connection_close', () => { truth.connections[0].t_closed = Date.now() / 1000; });
container.on('disconnected', (ctx) => {
  if (!done) truth.notes.push(`disconnected: ${ctx.error || ''}`);
  write();
});
container.on('error', (ctx) => truth.notes.push(`error: ${ctx.error}`));
let written = false;
function write() {
  if (written) return;
  written = true;
  fs.writeFileSync(out, JSON.stringify(truth));
  process.exit(done ? 0 : 1);
}
conn.on('connection_close', () => setTimeout(write, 200));
setTimeout(() => { truth.notes.push('timed out'); write(); }, 60000);
