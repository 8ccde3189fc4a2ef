// Draws a Grafana dashboard's panels from a real Prometheus, for a picture in the docs where
// Grafana itself is not at hand. Each panel's own queries go to Prometheus' HTTP API (range
// queries for timeseries, an instant query for a stat panel's value); the page lays the
// panels out by gridPos in a dark theme like Grafana's, draws the series with uPlot, and
// Debian's Chromium (headless, through playwright-core) screenshots it.
//
//   node render.mjs PROMETHEUS_URL DASHBOARD.json OUT.png [RANGE_MINUTES=10]
//
// Only what wisp-serve.json uses is covered: stat and timeseries panels, Prometheus
// targets with legendFormat, the units below, and Grafana's defaults for everything else.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { chromium } from "playwright-core";

const [promUrl, dashPath, outPath, rangeArg = "10"] = process.argv.slice(2);
if (!promUrl || !dashPath || !outPath) {
  console.error("usage: node render.mjs PROMETHEUS_URL DASHBOARD.json OUT.png [RANGE_MINUTES]");
  process.exit(2);
}
const dash = JSON.parse(readFileSync(dashPath, "utf8"));
const rangeSec = Math.round(Number(rangeArg) * 60);
const WIDTH = 1600; // page width; 24 grid columns across it
const end = Math.floor(Date.now() / 1000);
const start = end - rangeSec;

async function api(path, params) {
  const res = await fetch(`${promUrl}/api/v1/${path}?${new URLSearchParams(params)}`);
  const body = await res.json();
  if (body.status !== "success") throw new Error(`${path} ${params.query ?? ""}: ${body.error}`);
  return body.data;
}

// The scrape interval Prometheus reports for its targets (Grafana's data source setting
// plays this part; its default is 15 s).
const parseDur = (d) => {
  const m = /^(\d+)(ms|s|m|h)$/.exec(d ?? "");
  return m ? Number(m[1]) * { ms: 0.001, s: 1, m: 60, h: 3600 }[m[2]] : undefined;
};
const targets = await api("targets", {}).catch(() => ({ activeTargets: [] }));
const scrape = parseDur(targets.activeTargets[0]?.scrapeInterval) ?? 15;
// Grafana: step = max(min interval, range / max data points), the min interval being the
// scrape interval; $__rate_interval = max($__interval + scrape interval, 4 × scrape
// interval). Here with a one-minute floor, which is what Grafana's default 15 s gives.
const step = Math.max(scrape, Math.ceil(rangeSec / (WIDTH / 2)));
const rateInterval = `${Math.max(step + scrape, 4 * scrape, 60)}s`;
const expand = (expr) => expr.replaceAll("$__rate_interval", rateInterval);

// Grafana's legendFormat: {{label}} becomes the label's value, or nothing.
const legend = (fmt, metric) =>
  fmt
    ? fmt.replace(/\{\{\s*(.+?)\s*\}\}/g, (_, l) => metric[l] ?? "")
    : Object.keys(metric).length
      ? `{${Object.entries(metric).map(([k, v]) => `${k}="${v}"`).join(", ")}}`
      : null;
// NaN and ±Inf are gaps, as in Grafana.
const num = (s) => (Number.isFinite(Number(s)) ? Number(s) : null);

const panels = [];
for (const p of dash.panels) {
  const out = { type: p.type, title: p.title, gridPos: p.gridPos,
    unit: p.fieldConfig?.defaults?.unit ?? "short", series: [],
    // Grafana's default thresholds when the panel gives none: green, red from 80.
    steps: p.fieldConfig?.defaults?.thresholds?.steps ?? [{ value: null, color: "green" }, { value: 80, color: "red" }] };
  for (const t of p.targets ?? []) {
    const query = expand(t.expr);
    // Stat panels also query the range, for the sparkline Grafana draws under the number.
    const r = await api("query_range", { query, start, end, step });
    for (const s of r.result) {
      out.series.push({ name: legend(t.legendFormat, s.metric) ?? t.expr,
        points: s.values.map(([ts, v]) => [ts, num(v)]) });
    }
    if (p.type === "stat") {
      const v = await api("query", { query, time: end });
      out.values = (out.values ?? []).concat(v.result.map((s) => num(s.value[1])));
    }
  }
  panels.push(out);
}

const build = await api("status/buildinfo", {}).catch(() => ({}));
const data = {
  title: dash.title, start, end, step, rangeSec, rateInterval, width: WIDTH,
  prometheus: build.version ?? "?", panels,
};

const require = createRequire(import.meta.url);
const uplotJs = readFileSync(require.resolve("uplot/dist/uPlot.iife.min.js"), "utf8");
const uplotCss = readFileSync(require.resolve("uplot/dist/uPlot.min.css"), "utf8");
const html = `<!doctype html><html><head><meta charset="utf-8">
<style>${uplotCss}</style><style>${pageCss()}</style></head><body>
<script>${uplotJs}</script><script>(${drawPage})(${JSON.stringify(data)})</script></body></html>`;

const browser = await chromium.launch({
  executablePath: process.env.WISP_CHROMIUM || "/usr/bin/chromium",
  headless: true,
  // No sandbox as root; no background traffic to hosts this machine cannot reach.
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const page = await browser.newPage({ viewport: { width: WIDTH, height: 900 }, deviceScaleFactor: 1 });
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.setContent(html);
  await page.waitForFunction(() => window.rendered === true);
  if (errors.length) throw new Error(`page: ${errors.join("; ")}`);
  await page.screenshot({ path: outPath, fullPage: true });
} finally {
  await browser.close();
}
const withData = panels.filter((p) => p.series.some((s) => s.points.some(([, v]) => v !== null)));
console.log(`${outPath}: ${panels.length} panels, ${withData.length} with data; ` +
  `${new Date(start * 1000).toISOString()} to ${new Date(end * 1000).toISOString()}, ` +
  `step ${step}s, $__rate_interval ${rateInterval}, Prometheus ${data.prometheus}`);
const empty = panels.filter((p) => !withData.includes(p)).map((p) => p.title);
if (empty.length) console.log(`no data: ${empty.join(", ")}`);

// --- In the page -------------------------------------------------------------------------

function pageCss() {
  // Grafana's dark theme: its background, panel, border and text colours.
  return `
  body { margin: 0; background: #111217; color: rgb(204,204,220);
    font: 13px "Liberation Sans", Arial, sans-serif; }
  header { display: flex; align-items: center; height: 48px; padding: 0 16px;
    border-bottom: 1px solid rgba(204,204,220,0.12); background: #181b1f; }
  header .title { font-size: 16px; }
  header .title span { color: rgba(204,204,220,0.65); }
  header .note { margin-left: auto; color: rgba(204,204,220,0.65); font-size: 12px; }
  header .range { margin-left: 16px; padding: 5px 10px; border: 1px solid rgba(204,204,220,0.2);
    border-radius: 2px; font-size: 12px; }
  main { position: relative; }
  .panel { position: absolute; box-sizing: border-box; background: #181b1f;
    border: 1px solid rgba(204,204,220,0.12); border-radius: 2px; display: flex;
    flex-direction: column; overflow: hidden; }
  .panel h2 { margin: 0; height: 32px; line-height: 32px; padding: 0 8px; font-size: 14px;
    font-weight: 500; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
  .body { flex: 1; min-height: 0; position: relative; padding: 0 8px 8px; display: flex;
    flex-direction: column; }
  .plot { flex: 1; min-height: 0; }
  /* Grafana caps a bottom legend at 35% of the panel; the rest scrolls out of sight. */
  .legend { display: flex; flex-wrap: wrap; gap: 2px 14px; padding-top: 6px; font-size: 12px;
    color: rgba(204,204,220,0.8); max-height: 35%; overflow: hidden; flex-shrink: 0; }
  .legend i { display: inline-block; width: 14px; height: 4px; border-radius: 2px;
    margin-right: 6px; vertical-align: middle; }
  .nodata { position: absolute; inset: 0; display: flex; align-items: center;
    justify-content: center; color: rgba(204,204,220,0.65); font-size: 16px; }
  /* The number above, the sparkline along the bottom. */
  .stat { position: absolute; inset: 0 0 38% 0; display: flex; align-items: center;
    justify-content: center; font-size: 40px; font-weight: 500; }
  .stat span { position: relative; z-index: 1; }
  .spark { position: absolute; left: 0; right: 0; bottom: 0; }
  `;
}

function drawPage(DATA) {
  const COLORS = { green: "#73BF69", red: "#F2495C", yellow: "#FADE2A", orange: "#FF9830" };
  // Grafana's classic palette, series by series.
  const PALETTE = ["#7EB26D", "#EAB839", "#6ED0E0", "#EF843C", "#E24D42", "#1F78C1", "#BA43A9",
    "#705DA0", "#508642", "#CCA300", "#447EBC", "#C15C17", "#890F02", "#0A437C", "#6D1F62"];
  const FONT = '12px "Liberation Sans", Arial, sans-serif';
  const AXIS = "rgb(204,204,220)", GRID = "rgba(240,250,255,0.09)";

  // Units as Grafana prints them; auto decimals give about three significant digits.
  const fixed = (v, dec) => {
    if (dec === undefined) {
      const mag = v === 0 ? 0 : Math.floor(Math.log10(Math.abs(v)));
      dec = Math.min(Math.max(2 - mag, 0), 4);
      return String(Number(v.toFixed(dec))); // no trailing zeros
    }
    return v.toFixed(dec);
  };
  const scaled = (v, dec, steps, suffix) => {
    let i = 0;
    while (Math.abs(v) >= 1000 && i < steps.length - 1) { v /= 1000; i++; }
    return fixed(v, dec) + steps[i] + suffix;
  };
  const seconds = (v, dec) => {
    const a = Math.abs(v);
    if (a === 0) return "0 s";
    if (a < 1e-6) return fixed(v * 1e9, dec) + " ns";
    if (a < 1e-3) return fixed(v * 1e6, dec) + " µs";
    if (a < 1) return fixed(v * 1e3, dec) + " ms";
    if (a < 60) return fixed(v, dec) + " s";
    if (a < 3600) return fixed(v / 60, dec) + " min";
    if (a < 86400) return fixed(v / 3600, dec) + " hour";
    return fixed(v / 86400, dec) + " day";
  };
  const fmt = (v, unit, dec) => {
    if (v === null || v === undefined) return "";
    if (Number.isNaN(v)) return "NaN";
    switch (unit) {
      case "percentunit": return fixed(v * 100, dec) + "%";
      case "percent": return fixed(v, dec) + "%";
      case "s": return seconds(v, dec);
      case "ms": return seconds(v / 1000, dec);
      case "reqps": return scaled(v, dec, ["", "K", "M", "B"], " req/s");
      case "ops": return scaled(v, dec, ["", "K", "M", "B"], " ops/s");
      default: return scaled(v, dec, ["", " K", " Mil", " Bil"], "");
    }
  };
  const thresholdColor = (steps, v) => {
    let c = steps[0].color;
    for (const s of steps) if (s.value !== null && v >= s.value) c = s.color;
    return COLORS[c] ?? c;
  };
  const el = (tag, cls, parent, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    parent.appendChild(e);
    return e;
  };
  const hhmm = (ts) => new Date(ts * 1000).toISOString().slice(11, 16);

  const header = el("header", null, document.body);
  const title = el("div", "title", header);
  el("span", null, title, "Dashboards / ");
  title.append(DATA.title);
  el("div", "note", header, `Drawn from Prometheus ${DATA.prometheus} by dashboards/render ` +
    `(uPlot), not Grafana · step ${DATA.step}s · $__rate_interval = ${DATA.rateInterval}`);
  el("div", "range", header, `Last ${DATA.rangeSec / 60} minutes · ${hhmm(DATA.start)}–${hhmm(DATA.end)} UTC`);

  // Grafana's grid: 24 columns, rows 30 px high with 8 px between panels.
  const PAD = 16, GAP = 8, ROW = 30;
  const col = (DATA.width - 2 * PAD + GAP) / 24;
  const main = el("main", null, document.body);
  let bottom = 0;
  const plots = [];
  for (const p of DATA.panels) {
    const g = p.gridPos;
    const div = el("div", "panel", main);
    Object.assign(div.style, {
      left: `${PAD + g.x * col}px`, top: `${PAD + g.y * (ROW + GAP)}px`,
      width: `${g.w * col - GAP}px`, height: `${g.h * (ROW + GAP) - GAP}px`,
    });
    bottom = Math.max(bottom, PAD + (g.y + g.h) * (ROW + GAP));
    el("h2", null, div, p.title);
    const body = el("div", "body", div);
    const live = p.series.filter((s) => s.points.some(([, v]) => v !== null));
    if (p.type === "stat") {
      const v = p.values?.length ? p.values[0] : undefined;
      if (v === undefined) { el("div", "nodata", body, "No data"); continue; }
      const color = v === null ? AXIS : thresholdColor(p.steps, v);
      const stat = el("div", "stat", body);
      el("span", null, stat, v === null ? "NaN" : fmt(v, p.unit)).style.color = color;
      if (live.length) plots.push(() => sparkline(body, live[0].points, color));
      continue;
    }
    if (!live.length) { el("div", "nodata", body, "No data"); continue; }
    const plot = el("div", "plot", body);
    const legend = el("div", "legend", body);
    live.forEach((s, i) => {
      const item = el("span", null, legend);
      el("i", null, item).style.background = PALETTE[i % PALETTE.length];
      item.append(s.name);
    });
    plots.push(() => timeseries(plot, p, live));
  }
  main.style.height = `${bottom + PAD}px`;
  // Sizes are known once the panels are laid out.
  requestAnimationFrame(() => {
    plots.forEach((draw) => draw());
    window.rendered = true;
  });

  function timeseries(plot, p, series) {
    // One x axis for all series: the range query's steps.
    const xs = [];
    for (let t = DATA.start; t <= DATA.end; t += DATA.step) xs.push(t);
    const data = [xs, ...series.map((s) => {
      const m = new Map(s.points);
      return xs.map((t) => m.get(t) ?? null);
    })];
    const ctx = document.createElement("canvas").getContext("2d");
    ctx.font = FONT;
    const yValues = (u, splits) => splits.map((v) => fmt(v, p.unit));
    // Durations tick at whole minutes and hours once they are that long.
    const incrs = p.unit === "s" ? [...[-6, -5, -4, -3, -2, -1, 0].flatMap((e) =>
      [1, 2, 5].map((m) => m * 10 ** e)), 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200] : undefined;
    new uPlot({
      width: plot.clientWidth, height: plot.clientHeight,
      legend: { show: false }, cursor: { show: false },
      scales: {
        x: { time: true, range: [DATA.start, DATA.end] },
        // A flat line gets a unit of room above it, not uPlot's 0 to 100.
        y: { range: (u, lo, hi) => (lo === hi ? [Math.min(lo, 0), Math.max(hi, 0) + 1]
          : uPlot.rangeNum(lo, hi, 0.1, true)) },
      },
      axes: [
        { stroke: AXIS, font: FONT, grid: { stroke: GRID, width: 1 }, ticks: { show: false },
          // Whole minutes only, as the labels show no seconds.
          space: 60, incrs: [60, 120, 300, 600, 900, 1800, 3600], values: (u, splits) => splits.map(hhmm) },
        { stroke: AXIS, font: FONT, grid: { stroke: GRID, width: 1 }, ticks: { show: false },
          space: 30, values: yValues, incrs,
          size: (u, values) => 12 + Math.max(0, ...(values ?? []).map((s) => ctx.measureText(s).width)) },
      ],
      series: [{}, ...series.map((s, i) => ({ label: s.name, stroke: PALETTE[i % PALETTE.length], width: 1 }))],
    }, data, plot);
  }

  function sparkline(body, points, color) {
    const w = body.clientWidth, h = Math.round(body.clientHeight * 0.5);
    const ys = points.map(([, v]) => v).filter((v) => v !== null);
    const lo = Math.min(...ys), hi = Math.max(...ys);
    const x = (t) => ((t - DATA.start) / (DATA.end - DATA.start)) * w;
    const y = (v) => (hi === lo ? h * 0.5 : h - 2 - ((v - lo) / (hi - lo)) * (h - 4));
    const pts = points.filter(([, v]) => v !== null).map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`);
    const ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("class", "spark");
    svg.setAttribute("width", w);
    svg.setAttribute("height", h);
    const area = document.createElementNS(ns, "polygon");
    const first = pts[0].split(",")[0], last = pts[pts.length - 1].split(",")[0];
    area.setAttribute("points", `${first},${h} ${pts.join(" ")} ${last},${h}`);
    area.setAttribute("fill", color);
    area.setAttribute("fill-opacity", "0.18");
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("points", pts.join(" "));
    line.setAttribute("fill", "none");
    line.setAttribute("stroke", color);
    line.setAttribute("stroke-width", "1.5");
    svg.append(area, line);
    body.appendChild(svg);
  }
}
