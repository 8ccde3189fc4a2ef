// Drives Debian's Chromium (headless, through playwright-core) through a console that
// tests/console_browser.rs built and served: opens the login page, logs in with the form,
// waits for the console page to load its lazy chunk and call WebService, and prints one
// JSON line with what the page saw (its state and the visible text of each page), every
// page error and failed request, timings, and how far the screenshots of the login and
// deployment pages are from the reference PNGs.
//
//   node console.mjs '{"url": "...", "project": "...", "username": "...", "password": "...",
//                      "query": "?deployment=...&stage=...", "screenshot": "out.png",
//                      "compare": {"dir": "tests/browser/reference", "out": "/tmp/x",
//                                  "update": false},
//                      "logout": {"cookie": "token"}}'
//
// With `logout`, the console is then logged out through the logout page's button; the
// session cookie it held before, the page's text after, and the cookie's values left
// in the browser are printed under `logout`.
//
// With `compare`, the login page and the deployment page are shot at a fixed size with
// the regions that change from run to run (class `dynamic`) masked, and compared with
// `<dir>/login.png` and `<dir>/deployment.png` by pixelmatch (the pixels that differ, in
// all and the most in any 32x32 square); the shots and a diff image go to `out`. With `update`, the shots become the references instead.
import fs from "node:fs";
import path from "node:path";
import { chromium } from "playwright-core";
import pixelmatch from "pixelmatch";
import { PNG } from "pngjs";

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
// How different two pixels may be before they count (pixelmatch's OKLab distance; its
// default is 0.1): anti-aliasing is detected and ignored besides.
const PIXEL_THRESHOLD = 0.2;
// The side of the square in which differing pixels are also counted (the most found in
// any one): font hinting scatters a few over the page, a changed word or style
// gathers many in one place.
const WINDOW = 32;

// Shoots the page with its dynamic regions masked, and compares the shot with the
// reference `name`.png: { width, height, differentPixels, ratio } or { updated: true }.
async function shootAndCompare(page, name) {
  const { dir, out: outDir, update } = args.compare;
  fs.mkdirSync(outDir, { recursive: true });
  const shotPath = path.join(outDir, `${name}.png`);
  await page.screenshot({
    path: shotPath,
    mask: [page.locator(".dynamic")],
    maskColor: "#808080",
    animations: "disabled",
    caret: "hide",
  });
  const reference = path.join(dir, `${name}.png`);
  if (update) {
    fs.mkdirSync(dir, { recursive: true });
    fs.copyFileSync(shotPath, reference);
    return { updated: true };
  }
  if (!fs.existsSync(reference)) return { missing: reference };
  const expected = PNG.sync.read(fs.readFileSync(reference));
  const actual = PNG.sync.read(fs.readFileSync(shotPath));
  const { width, height } = expected;
  if (actual.width !== width || actual.height !== height) {
    return { sizeMismatch: [actual.width, actual.height, width, height] };
  }
  const diff = new PNG({ width, height });
  const differentPixels = pixelmatch(expected.data, actual.data, diff.data, width, height, {
    threshold: PIXEL_THRESHOLD,
  });
  fs.writeFileSync(path.join(outDir, `${name}.diff.png`), PNG.sync.write(diff));
  const mostInAWindow = pixelmatch(expected.data, actual.data, null, width, height, {
    threshold: PIXEL_THRESHOLD,
    windowSize: WINDOW,
  });
  return {
    width,
    height,
    differentPixels,
    ratio: differentPixels / (width * height),
    window: WINDOW,
    mostInAWindow,
  };
}

const out = { errors: [], failedRequests: [], redirects: 0, contentTypes: {}, screenshots: {} };
try {
  // A fixed page size and scale, so the screenshots compare pixel for pixel.
  const context = await browser.newContext({
    // A console over https with the test CA's certificate (tests/e2e/console_browser.rs).
    ignoreHTTPSErrors: Boolean(args.ignoreHTTPSErrors),
    viewport: { width: 1000, height: 700 },
    deviceScaleFactor: 1,
    locale: "en-US",
    timezoneId: "UTC",
  });
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
  out.login.visibleText = await page.innerText("body");
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
  if (args.compare) out.screenshots.login = await shootAndCompare(page, "login");
  await page.fill("#project", args.project);
  await page.fill("#username", args.username);
  await page.fill("#password", args.password);
  // The form posts to /auth/login/static, which sets the session and sends us to /.
  await Promise.all([page.waitForURL(`${args.url}/`), page.click("#login")]);
  await page.waitForSelector(done);
  out.home = await page.evaluate(() => JSON.stringify(window.__result)).then(JSON.parse);
  out.home.visibleText = await page.innerText("body");
  // A deployment's page: the lazy chunk, GetMe and the stage log the query names.
  await page.goto(`${args.url}/deployments${args.query || ""}`);
  await page.waitForSelector(done);
  out.page = await page.evaluate(() => JSON.stringify(window.__result)).then(JSON.parse);
  out.page.visibleText = await page.innerText("body");
  if (args.screenshot) await page.screenshot({ path: args.screenshot });
  if (args.compare) out.screenshots.deployment = await shootAndCompare(page, "deployment");
  if (args.logout) {
    // Logging out as the user does: the logout page's button. What the page then shows
    // (the console without a session) goes to `out.logout`, with its errors.
    const before = { errors: out.errors.length, failed: out.failedRequests.length };
    const session = (await context.cookies()).find((c) => c.name === args.logout.cookie);
    out.logout = { sessionCookie: session ? session.value : null };
    await page.goto(`${args.url}/auth/logout`);
    out.logout.pageText = await page.innerText("body");
    await Promise.all([page.waitForURL(`${args.url}/`), page.click("button[type=submit]")]);
    await page.waitForSelector(done);
    out.logout.visibleText = await page.innerText("body");
    out.logout.cookiesAfter = (await context.cookies())
      .filter((c) => c.name === args.logout.cookie)
      .map((c) => c.value);
    out.logout.errors = out.errors.splice(before.errors);
    out.logout.failedRequests = out.failedRequests.splice(before.failed);
  }
} catch (e) {
  out.errors.push(`driver: ${e.message}`);
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
