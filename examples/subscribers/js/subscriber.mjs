// A vcbus subscriber in JavaScript (Node 18+, the `nats` package): print a job's phase changes.
//
// vcbus publishes every domain event on the JetStream stream VCBUS_JOBS as a CloudEvent in
// binary content mode: the attributes are NATS headers (ce-id, ce-source, ce-type, ce-subject,
// ce-time, ce-datacontenttype, ce-dataschema), the body is the event as JSON (its schema is
// docs/schemas/<tag>.json; docs/asyncapi.yaml lists every channel). This reads them with an
// ordered consumer: no state on the server, it starts at the first stored event.
//
//   npm install                                   # once, here
//   NATS_URL=nats://127.0.0.1:4222 node subscriber.mjs [--job NS/NAME] [--json] [--follow]
//
// Without --follow it stops when it has read what was stored when it started, or, with
// --job, when the job reaches a final phase. --json prints each event in CloudEvents'
// structured JSON form, one per line (what `vcbus events tail --json` prints).
import { connect } from "nats";

const FINAL = new Set(["Completed", "Failed", "Terminated", "Aborted"]);
const STREAM = "VCBUS_JOBS";

function parseArgs(argv) {
  const args = { job: null, json: false, follow: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--job") args.job = argv[++i];
    else if (a === "--json") args.json = true;
    else if (a === "--follow") args.follow = true;
    else throw new Error(`unknown argument ${a} (expected --job NS/NAME, --json, --follow)`);
  }
  if (args.job !== null && !/^[^/]+\/[^/]+$/.test(args.job ?? "")) {
    throw new Error(`--job ${args.job}: expected NAMESPACE/NAME`);
  }
  return args;
}

// A name as one subject token, as vcbus writes it: . * > % and whitespace as %XX.
const token = (text) => text.replace(/[.*>%\s]/g, (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0"));

function subjectFor(job) {
  if (job === null) return "vcbus.job.*.*.phase.changed.v1";
  const [ns, name] = job.split("/");
  return `vcbus.job.${token(ns)}.${token(name)}.phase.changed.v1`;
}

// The CloudEvent of one message: the attributes from the headers, the data from the body.
function cloudEvent(msg) {
  const h = (name) => msg.headers?.get(name) ?? "";
  if (h("ce-specversion") !== "1.0") throw new Error(`stream seq ${msg.seq}: not a CloudEvents 1.0 message`);
  const event = {
    specversion: "1.0",
    id: h("ce-id"),
    source: h("ce-source"),
    type: h("ce-type"),
    subject: h("ce-subject"),
  };
  if (h("ce-time")) event.time = h("ce-time");
  event.datacontenttype = h("ce-datacontenttype");
  event.dataschema = h("ce-dataschema");
  event.causationid = h("ce-causationid");
  event.sequence = msg.seq;
  event.data = msg.json();
  return event;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const nc = await connect({ servers: process.env.NATS_URL ?? "nats://127.0.0.1:4222", name: "vcbus-js-subscriber" });
  try {
    const subject = subjectFor(args.job);
    // how many are stored now: without --follow, nothing to read means nothing to wait for
    const info = await (await nc.jetstreamManager()).streams.info(STREAM, { subjects_filter: subject });
    const stored = Object.values(info.state.subjects ?? {}).reduce((a, b) => a + b, 0);
    if (!args.follow && stored === 0) return;
    const consumer = await nc.jetstream().consumers.get(STREAM, { filterSubjects: [subject] });
    const messages = await consumer.consume();
    for await (const msg of messages) {
      const ev = cloudEvent(msg);
      if (args.json) {
        console.log(JSON.stringify(ev));
      } else {
        const d = ev.data;
        console.log(`${ev.time ?? "-"} ${ev.subject} ${d.from || "-"} -> ${d.to} [${d.cause ?? ""}] (${ev.source} ${ev.id})`);
      }
      if (!args.follow && (msg.info.pending === 0 || (args.job !== null && FINAL.has(ev.data.to)))) {
        break;  // what was stored is read (or the job is over)
      }
    }
  } finally {
    await nc.close();
  }
}

main().catch((err) => {
  console.error(`error: ${err.message}`);
  process.exit(1);
});
