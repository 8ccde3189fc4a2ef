// The test console's entry script (tests/console_browser.rs adds __CHUNK_URL__ and a
// padding that takes it past 1 MB). Like upstream's console it is a single-page app:
// /login shows the login form, every other path calls WebService over gRPC-web with the
// session cookie, and a deployment's page loads a lazy chunk first, as webpack does, by
// a <script> element.
"use strict";

// UTF-8 text written as is, and the same text escaped: equal only if the browser
// decoded this file as UTF-8.
const TEXT = "Déploiement réussi ✓ — 日本語";
const EXPECTED = "D\u00e9ploiement r\u00e9ussi \u2713 \u2014 \u65e5\u672c\u8a9e";
const HTML_EXPECTED = "D\u00e9j\u00e0 vu \u2713";

const result = { textOk: TEXT === EXPECTED, text: TEXT };
window.__result = result;

function app() {
  return document.getElementById("app");
}

function finish(state) {
  result.renderedMs = Math.round(performance.now());
  const paint = performance.getEntriesByName("first-contentful-paint")[0];
  if (paint) result.firstContentfulPaintMs = Math.round(paint.startTime);
  app().dataset.state = state;
}

function fail(what, e) {
  result.error = `${what}: ${e && e.message ? e.message : e}`;
  app().textContent = result.error;
  finish("failed");
}

// --- protobuf, just enough: varints, strings, nested messages -------------------------

function varint(n) {
  const out = [];
  let v = BigInt(n);
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) byte |= 0x80;
    out.push(byte);
  } while (v > 0n);
  return out;
}

function field(number, wire, payload) {
  return [...varint((number << 3) | wire), ...payload];
}

function stringField(number, s) {
  const bytes = new TextEncoder().encode(s);
  return field(number, 2, [...varint(bytes.length), ...bytes]);
}

function readMessage(bytes) {
  const fields = [];
  let i = 0;
  const readVarint = () => {
    let v = 0n;
    let shift = 0n;
    for (;;) {
      const b = bytes[i++];
      v |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return v;
      shift += 7n;
    }
  };
  while (i < bytes.length) {
    const key = Number(readVarint());
    const number = key >> 3;
    const wire = key & 7;
    if (wire === 0) fields.push({ number, value: readVarint() });
    else if (wire === 1) i += 8;
    else if (wire === 5) i += 4;
    else if (wire === 2) {
      const len = Number(readVarint());
      fields.push({ number, bytes: bytes.subarray(i, i + len) });
      i += len;
    } else throw new Error(`unexpected wire type ${wire}`);
  }
  return fields;
}

const utf8 = new TextDecoder("utf-8");
const text = (f) => (f ? utf8.decode(f.bytes) : "");

// --- gRPC-web ---------------------------------------------------------------------

async function call(method, message) {
  const body = new Uint8Array(5 + message.length);
  new DataView(body.buffer).setUint32(1, message.length);
  body.set(message, 5);
  const response = await fetch(`/grpc.service.webservice.WebService/${method}`, {
    method: "POST",
    headers: {
      "content-type": "application/grpc-web+proto",
      "x-grpc-web": "1",
      "x-user-agent": "grpc-web-javascript/0.1",
    },
    body,
  });
  const bytes = new Uint8Array(await response.arrayBuffer());
  let status = response.headers.get("grpc-status");
  let grpcMessage = response.headers.get("grpc-message") || "";
  let payload = null;
  for (let i = 0; i < bytes.length; ) {
    const flags = bytes[i];
    const len = new DataView(bytes.buffer, bytes.byteOffset + i + 1, 4).getUint32(0);
    const frame = bytes.subarray(i + 5, i + 5 + len);
    i += 5 + len;
    if (flags & 0x80) {
      for (const line of utf8.decode(frame).split("\r\n")) {
        const [k, ...v] = line.split(":");
        if (k.trim() === "grpc-status") status = v.join(":").trim();
        if (k.trim() === "grpc-message") grpcMessage = decodeURIComponent(v.join(":").trim());
      }
    } else payload = frame;
  }
  if (response.status !== 200 || status !== "0") {
    throw new Error(`${method}: HTTP ${response.status}, grpc-status ${status}: ${grpcMessage}`);
  }
  return {
    fields: readMessage(payload || new Uint8Array()),
    bytes: bytes.length,
    encoding: response.headers.get("content-encoding"),
  };
}

async function getMe() {
  const me = await call("GetMe", []);
  const get = (n) => me.fields.find((f) => f.number === n);
  return { subject: text(get(1)), projectId: text(get(3)) };
}

// The names in a list answer: `repeated <message> = 1`, each with `string name = 2`
// (ListPipeds' pipeds, ListApplications' applications), sorted for a stable page.
async function listNames(method) {
  const list = await call(method, []);
  return list.fields
    .filter((f) => f.number === 1)
    .map((f) => text(readMessage(f.bytes).find((g) => g.number === 2)))
    .sort();
}

const DEPLOYMENT_STATUS = [
  "PENDING",
  "PLANNED",
  "RUNNING",
  "ROLLING_BACK",
  "SUCCESS",
  "FAILURE",
  "CANCELLED",
];

// GetDeployment: the application's name (3) and the status (30), as the console shows it.
async function getDeployment(deploymentId) {
  const answer = await call("GetDeployment", stringField(1, deploymentId));
  const deployment = readMessage(answer.fields.find((f) => f.number === 1).bytes);
  const status = deployment.find((f) => f.number === 30);
  return {
    applicationName: text(deployment.find((f) => f.number === 3)),
    status: DEPLOYMENT_STATUS[status ? Number(status.value) : 0],
  };
}

// Text in CJK scripts, in a box of a fixed width that the screenshot comparison masks:
// whether the machine has a CJK font changes its glyphs (boxes without one) and widths,
// and must not move the rest of the page. Its text is still in the page's visible text.
const cjk = (s) =>
  `<span class="dynamic cjk" style="display:inline-block;width:${[...s].length + 1}em;` +
  `overflow:hidden;vertical-align:bottom">${s}</span>`;
const TEXT_HTML = TEXT.replace("日本語", cjk("日本語"));

const escape = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;");
const list = (id, names) =>
  `<ul id="${id}">${names.map((n) => `<li>${escape(n)}</li>`).join("")}</ul>`;

async function getStageLog(deploymentId, stageId) {
  const request = [...stringField(1, deploymentId), ...stringField(2, stageId)];
  const log = await call("GetStageLog", request);
  const blocks = log.fields
    .filter((f) => f.number === 1)
    .map((f) => {
      const block = readMessage(f.bytes);
      const index = block.find((b) => b.number === 1);
      return { index: index ? Number(index.value) : 0, log: text(block.find((b) => b.number === 2)) };
    });
  const completed = log.fields.some((f) => f.number === 2 && f.value === 1n);
  return {
    blocks: blocks.length,
    logBytes: blocks.reduce((n, b) => n + new TextEncoder().encode(b.log).length, 0),
    first: blocks.length ? blocks[0].log.slice(0, 200) : "",
    lastIndex: blocks.length ? blocks[blocks.length - 1].index : -1,
    completed,
    wireBytes: log.bytes,
    contentEncoding: log.encoding,
  };
}

// --- the lazy chunk, as webpack loads one -----------------------------------------

function loadChunk(url) {
  return new Promise((resolve, reject) => {
    window.__chunkLoaded = resolve;
    const script = document.createElement("script");
    script.src = url;
    script.onerror = () => reject(new Error(`chunk ${url} failed to load`));
    document.head.appendChild(script);
  });
}

// --- pages ------------------------------------------------------------------------

function loginPage() {
  const params = new URLSearchParams(location.search);
  const error = document.cookie
    .split("; ")
    .find((c) => c.startsWith("error="));
  app().innerHTML = `
    <h1>Wisp test console</h1>
    <p id="utf8">${TEXT_HTML}</p>
    <form id="login-form" method="post" action="/auth/login/static">
      <p><label for="project">Project</label>
        <input id="project" name="project" value="${params.get("project") || ""}"></p>
      <p><label for="username">Username</label>
        <input id="username" name="username" placeholder="username"></p>
      <p><label for="password">Password</label>
        <input id="password" name="password" type="password"></p>
      <button id="login" type="submit">Log in</button>
    </form>
    <p id="login-error">${error ? decodeURIComponent(error.slice(6)) : ""}</p>`;
  finish("done");
}

async function homePage() {
  try {
    result.me = await getMe();
    result.pipeds = await listNames("ListPipeds");
    result.applications = await listNames("ListApplications");
    app().innerHTML = `<h1>Signed in as ${escape(result.me.subject)}</h1><p>${TEXT_HTML}</p>
      <h2>Pipeds</h2>${list("pipeds", result.pipeds)}
      <h2>Applications</h2>${list("applications", result.applications)}`;
    finish("done");
  } catch (e) {
    fail("home", e);
  }
}

async function deploymentPage() {
  try {
    const params = new URLSearchParams(location.search);
    const chunk = await loadChunk("__CHUNK_URL__");
    result.chunk = chunk;
    result.me = await getMe();
    result.deployment = await getDeployment(params.get("deployment"));
    result.stageLog = await getStageLog(params.get("deployment"), params.get("stage"));
    const log = result.stageLog;
    // The bytes on the wire depend on the path (compressed or not): a dynamic region
    // the screenshot comparison masks.
    app().innerHTML = `
      <h1>${escape(result.me.subject)} @ ${escape(result.me.projectId)}</h1>
      <p id="deployment">${escape(result.deployment.applicationName)}:
        <strong>${result.deployment.status}</strong></p>
      <p id="utf8">${TEXT_HTML}</p>
      <p id="chunk">${cjk(chunk.text)} (${chunk.bytes} bytes of chunk)</p>
      <p id="stage-log">${log.blocks} log blocks, ${log.logBytes} bytes,
        completed ${log.completed}</p>
      <p class="dynamic" id="wire">${log.wireBytes} bytes on the wire</p>
      <pre>${escape(log.first)}</pre>`;
    finish("done");
  } catch (e) {
    fail("deployment page", e);
  }
}

result.htmlTextOk = (document.getElementById("html-text") || {}).textContent === HTML_EXPECTED;
if (location.pathname.startsWith("/login")) loginPage();
else if (location.pathname.startsWith("/deployments")) deploymentPage();
else homePage();
