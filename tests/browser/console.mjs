// Drives Debian's Chromium (headless, through playwright-core) through a console that
// tests/console_browser.rs built and served: opens the login page, logs in with the form,
// waits for the console page to load its lazy chunk and call WebService, and prints one
// JSON line with what the page saw, every page error and failed request, and timings.
//
//   node console.mjs '{"url": "...", "project": "...", "username": "...", "password": "...",
//                      "query": "?deployment=...&stage=...", "screenshot": "out.png"}'
import { chromium } from "playwright-core";

const args = JSON.parse(process.argv[2]);
const executablePath = process.env.WISP_CHROMIUM || "/usr/bin/chromium";
const timeout = 90_000;

const browser = await chromium.launch({
  executablePath,
  headless: true,
  // No sandbox as root; no background traffic to hosts this machine cannot reach.
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});
const out = { errors: [], failedRequests: [], redirects: 0, contentTypes: {} };
try {
  const context = await browser.newContext();
  const page = await context.newPage();
  page.setDefaultTimeout(timeout);
  page.on("pageerror", (e) => out.errors.push(`pageerror: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") out.errors.push(`console: ${m.text()}`);
  });
  page.on("requestfailed", (r) =>
    out.failedRequests.push(`${r.url()}: ${r.failure()?.errorText}`),
  );
  page.on("response", (r) => {
    const status = r.status();
    if (status >= 300 && status < 400) out.redirects += 1;
    if (status >= 400) out.failedRequests.push(`${r.url()}: HTTP ${status}`);
    // What each document and script came as (from the server or the bucket).
    const file = new URL(r.url()).pathname.split("/").pop();
    if (status === 200 && /\.(js|html)$|^(login|deployments|)$/.test(file)) {
      out.contentTypes[file || "/"] = r.headers()["content-type"];
    }
  });

  const done = "#app[data-state=done], #app[data-state=failed]";
  // A cold browser: the login page loads the entry script and renders the form.
  await page.goto(`${args.url}/login?project=${encodeURIComponent(args.project)}`);
  await page.waitForSelector("#login-form");
  out.login = await page.evaluate(() => JSON.stringify(window.__result)).then(JSON.parse);
  // First contentful paint, once the browser has recorded it.
  out.login.firstContentfulPaintMs = await page.evaluate(
    () =>
      new Promise((resolve) => {
        const entry = () => performance.getEntriesByName("first-contentful-paint")[0];
        if (entry()) return resolve(Math.round(entry().startTime));
        new PerformanceObserver(() => resolve(Math.round(entry().startTime))).observe({
          type: "paint",
          buffered: true,
        });
      }),
  );
  await page.fill("#project", args.project);
  await page.fill("#username", args.username);
  await page.fill("#password", args.password);
  // The form posts to /auth/login/static, which sets the session and sends us to /.
  await Promise.all([page.waitForURL(`${args.url}/`), page.click("#login")]);
  await page.waitForSelector(done);
  out.home = await page.evaluate(() => JSON.stringify(window.__result)).then(JSON.parse);
  // A deployment's page: the lazy chunk, GetMe and the stage log the query names.
  await page.goto(`${args.url}/deployments${args.query || ""}`);
  await page.waitForSelector(done);
  out.page = await page.evaluate(() => JSON.stringify(window.__result)).then(JSON.parse);
  out.appText = await page.textContent("#app");
  if (args.screenshot) await page.screenshot({ path: args.screenshot });
} catch (e) {
  out.errors.push(`driver: ${e.message}`);
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
