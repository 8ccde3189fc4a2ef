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
    <p id="utf8">${TEXT}</p>
    <form id="login-form" method="post" action="/auth/login/static">
      <input id="project" name="project" value="${params.get("project") || ""}">
      <input id="username" name="username" placeholder="username">
      <input id="password" name="password" type="password">
      <button id="login" type="submit">Log in</button>
    </form>
    <p id="login-error">${error ? decodeURIComponent(error.slice(6)) : ""}</p>`;
  finish("done");
}

async function homePage() {
  try {
    result.me = await getMe();
    app().innerHTML = `<h1>Signed in as ${result.me.subject}</h1><p>${TEXT}</p>`;
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
    result.stageLog = await getStageLog(params.get("deployment"), params.get("stage"));
    const log = result.stageLog;
    app().innerHTML = `
      <h1>${result.me.subject} @ ${result.me.projectId}</h1>
      <p id="utf8">${TEXT}</p>
      <p id="chunk">${chunk.text} (${chunk.bytes} bytes of chunk)</p>
      <p id="stage-log">${log.blocks} log blocks, ${log.logBytes} bytes,
        completed ${log.completed}, ${log.wireBytes} bytes on the wire</p>
      <pre>${log.first.replace(/</g, "&lt;")}</pre>`;
    finish("done");
  } catch (e) {
    fail("deployment page", e);
  }
}

result.htmlTextOk = (document.getElementById("html-text") || {}).textContent === HTML_EXPECTED;
if (location.pathname.startsWith("/login")) loginPage();
else if (location.pathname.startsWith("/deployments")) deploymentPage();
else homePage();
