// Starts what a headless e2e test needs — Xvfb, tauri-driver, the real Hearth binary in a WebKit
// window — and stops all of it (tauri-driver with SIGTERM, so it stops WebKitWebDriver too), even
// when a test fails or the test process is interrupted.
import { spawn, execFileSync } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { remote } from "webdriverio";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const APP_BIN = process.env.HEARTH_APP_BIN ?? path.join(ROOT, "target/debug/hearth");
export const SCREENSHOT_DIR = path.join(ROOT, "test-output/screenshots");

/**
 * The app's session bus in tests: a socket that does not exist, so no desktop keyring answers and a
 * test's secrets go to its throw-away data folder, never into a keyring of the machine running it.
 */
export const NO_KEYRING_ENV = { DBUS_SESSION_BUS_ADDRESS: "unix:path=/nonexistent/hearth-e2e-no-session-bus" };

/** Bounds, named: how long each start-up step may take. */
const XVFB_START_MS = 10_000;
const DRIVER_START_MS = 20_000;
const STOP_GRACE_MS = 5_000;
export const UI_WAIT_MS = 60_000;
/** A WebDriver screenshot taken the instant text appears can be stale. */
const SCREENSHOT_SETTLE_MS = 500;

const children = new Set();
process.on("exit", () => {
  for (const c of children) {
    try { c.kill("SIGTERM"); } catch {}
  }
});
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => process.exit(130));

function track(child) {
  children.add(child);
  child.once("exit", () => children.delete(child));
  return child;
}

async function stopChild(child) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), STOP_GRACE_MS);
  await exited;
  clearTimeout(timer);
}

function withTimeout(promise, ms, what) {
  let t;
  return Promise.race([
    promise.finally(() => clearTimeout(t)),
    new Promise((_, rej) => (t = setTimeout(() => rej(new Error(`${what} did not happen within ${ms} ms`)), ms))),
  ]);
}

async function freePort() {
  const srv = net.createServer();
  srv.listen(0, "127.0.0.1");
  await once(srv, "listening");
  const { port } = srv.address();
  await new Promise((r) => srv.close(r));
  return port;
}

async function waitForPort(port, ms, child, what) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${what} exited early with code ${child.exitCode}`);
    const ok = await new Promise((r) => {
      const s = net.connect(port, "127.0.0.1", () => { s.end(); r(true); });
      s.on("error", () => r(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what} did not listen on ${port} within ${ms} ms`);
}

/** Xvfb on a display number it picks itself (-displayfd), so parallel runs never collide. */
export async function startXvfb() {
  const xvfb = track(spawn("Xvfb", ["-displayfd", "3", "-screen", "0", "1280x860x24", "-nolisten", "tcp"], {
    stdio: ["ignore", "ignore", "pipe", "pipe"],
  }));
  let stderr = "";
  xvfb.stderr.on("data", (d) => (stderr += d));
  const display = await withTimeout(new Promise((resolve, reject) => {
    let buf = "";
    xvfb.stdio[3].on("data", (d) => {
      buf += d;
      if (buf.includes("\n")) resolve(`:${buf.trim()}`);
    });
    xvfb.once("exit", (code) => reject(new Error(`Xvfb exited (${code}): ${stderr.slice(-500)}`)));
  }), XVFB_START_MS, "Xvfb start");
  return { xvfb, display };
}

/**
 * Start Xvfb, tauri-driver and the app with `env` added to the app's environment. Every app gets
 * its own throw-away data folder (HEARTH_DATA_DIR) so a test never touches a user's real data.
 */
export async function launchApp({ env = {}, dataDir = null, cwd = undefined } = {}) {
  if (!existsSync(APP_BIN)) throw new Error(`app binary missing: ${APP_BIN} (build it with cargo build -p hearth)`);
  const ownsData = !dataDir;
  dataDir ??= mkdtempSync(path.join(os.tmpdir(), "hearth-e2e-"));
  const { xvfb, display } = await startXvfb();
  const port = await freePort();
  const nativePort = await freePort();
  const driver = track(spawn("tauri-driver", ["--port", String(port), "--native-port", String(nativePort)], {
    // The app's own log stays in its data folder; the test output shows warnings only.
    // GTK keeps dialog settings in dconf, which needs a session bus Xvfb does not have: keep them in memory.
    env: { ...process.env, ...NO_KEYRING_ENV, DISPLAY: display, HEARTH_DATA_DIR: dataDir, RUST_LOG: process.env.HEARTH_E2E_LOG ?? "warn", GSETTINGS_BACKEND: "memory", ...env },
    stdio: ["ignore", "inherit", "inherit"],
    cwd,
  }));
  const app = { xvfb, driver, dataDir, ownsData, display, browser: null };
  try {
    await waitForPort(port, DRIVER_START_MS, driver, "tauri-driver");
    app.browser = await remote({
      hostname: "127.0.0.1",
      port,
      logLevel: "warn",
      capabilities: {
        browserName: "wry",
        "wdio:enforceWebDriverClassic": true,
        "tauri:options": { application: APP_BIN },
      },
    });
  } catch (e) {
    await stopApp(app);
    throw e;
  }
  return app;
}

/** Ends the WebDriver session (closes the app), then tauri-driver (SIGTERM) and Xvfb. */
export { stopChild };

export async function stopApp(app) {
  if (!app) return;
  try { await app.browser?.deleteSession(); } catch {}
  await stopChild(app.driver);
  await stopChild(app.xvfb);
  if (app.ownsData) rmSync(app.dataDir, { recursive: true, force: true });
}

export async function textOf(browser, testid, { timeout = UI_WAIT_MS } = {}) {
  const el = await browser.$(`[data-testid="${testid}"]`);
  await el.waitForDisplayed({ timeout });
  // WebKitWebDriver's getText is empty for some elements (buttons); innerText is what a user sees.
  return String(await browser.execute((e) => e.innerText, el)).trim();
}

/** innerText of every element matching `selector`, in document order. */
export async function texts(browser, selector) {
  return browser.execute((sel) => Array.from(document.querySelectorAll(sel)).map((e) => e.innerText.trim()), selector);
}

/** An attribute of every element matching `selector`. */
export async function attrs(browser, selector, name) {
  return browser.execute((sel, n) => Array.from(document.querySelectorAll(sel)).map((e) => e.getAttribute(n)), selector, name);
}

/** Wait until `predicate()` (run in the test) is true. */
export async function until(predicate, what, timeout = UI_WAIT_MS) {
  const deadline = Date.now() + timeout;
  let last;
  while (Date.now() < deadline) {
    try {
      if ((last = await predicate())) return last;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out waiting for ${what} (last: ${last})`);
}

/** Add the project at `folder` through the sidebar's form and wait until it is listed. */
export async function addProject(browser, folder) {
  await click(browser, "add-project");
  await (await browser.$('[data-testid="project-path"]')).setValue(folder);
  await click(browser, "project-add-submit");
  const name = path.basename(folder);
  await until(async () => (await texts(browser, '[data-testid="project-item"]')).includes(name), `${name} in the sidebar`, 20_000);
}

/** Put `text` in the composer as one value (typing a newline or 200 KB key by key would not do). */
export async function setComposer(browser, text) {
  await browser.execute((value) => {
    const input = document.querySelector('[data-testid="composer-input"]');
    input.value = value;
    input.dispatchEvent(new Event("input", { bubbles: true }));
  }, text);
}

export async function click(browser, testid) {
  const el = await browser.$(`[data-testid="${testid}"]`);
  await el.waitForClickable({ timeout: UI_WAIT_MS });
  await el.click();
}

/**
 * A screenshot of the app's window as X shows it: what the user sees. Not WebDriver's own
 * screenshot: WebKitWebDriver renders that snapshot itself, and with compositing off (Hearth's
 * choice on a machine without a GPU, `host/display.rs`) it never returns once a `<select>` was
 * changed, though the window goes on painting.
 */
export async function screenshot(app, name) {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  await new Promise((r) => setTimeout(r, SCREENSHOT_SETTLE_MS));
  const file = path.join(SCREENSHOT_DIR, `${name}.png`);
  // The main window is titled "Hearth" (or "Hearth cannot start"); the screen when it is not found.
  let window = "root";
  try { window = xdotool(app.display, ["search", "--onlyvisible", "--name", "^Hearth"]).split("\n")[0] || "root"; } catch {}
  execFileSync("import", ["-window", window, file], { env: { ...process.env, DISPLAY: app.display }, timeout: DIALOG_WAIT_MS });
  console.log(`screenshot: ${path.relative(ROOT, file)}`);
  return file;
}

/** The pinned runtime binary installed by `npm ci`, and the version it prints when run. */
export function realRuntime() {
  const pinned = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")).dependencies["opencode-ai"];
  const bin = ["opencode-linux-x64", "opencode-linux-x64-baseline"]
    .map((p) => path.join(ROOT, "node_modules", p, "bin", "opencode"))
    .find((p) => existsSync(p));
  if (!bin) throw new Error(`runtime binary missing under node_modules: run scripts/setup.sh (pinned opencode-ai@${pinned})`);
  const printed = execFileSync(bin, ["--version"], { encoding: "utf8", env: { PATH: process.env.PATH, HOME: os.tmpdir() } }).trim();
  return { bin, pinned, printed };
}

/**
 * Claude Code's ACP adapter as `scripts/setup.sh` installs it. Missing, the suite fails — unless
 * HEARTH_SKIP_AGENT_TESTS=1, and then `null` (the caller says so and runs without it).
 */
export function realClaudeAgent() {
  const bin = path.join(ROOT, "node_modules/.bin/claude-agent-acp");
  if (existsSync(bin)) return { bin };
  if (process.env.HEARTH_SKIP_AGENT_TESTS === "1") return null;
  throw new Error(`Claude Code's ACP adapter is missing (${bin}): run scripts/setup.sh, or set HEARTH_SKIP_AGENT_TESTS=1`);
}

/**
 * Seed a data folder with one project and a conversation of `messages` messages (their headings
 * and names made of `word`), with the
 * `seed_conversation` example built beside the app binary under test (`cargo test` builds the
 * examples in the same profile); built with cargo only when it is not there.
 */
export function seedConversation(dataDir, project, messages, word = "Module") {
  const args = [dataDir, project, String(messages), word];
  const built = path.join(path.dirname(APP_BIN), "examples", "seed_conversation");
  if (existsSync(built)) {
    execFileSync(built, args, { stdio: ["ignore", "ignore", "inherit"] });
    return;
  }
  const release = path.basename(path.dirname(APP_BIN)) === "release" ? ["--release"] : [];
  execFileSync("cargo", ["run", "-q", ...release, "-p", "hearth-core", "--example", "seed_conversation", "--", ...args], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
}

/** How long a native dialog may take to appear. */
const DIALOG_WAIT_MS = 20_000;
/** Pause after typing into a dialog before pressing Enter. */
const DIALOG_SETTLE_MS = 800;

function xdotool(display, args) {
  return execFileSync("xdotool", args, { env: { ...process.env, DISPLAY: display }, encoding: "utf8", timeout: DIALOG_WAIT_MS }).trim();
}

/**
 * Answer the native (GTK) file chooser titled `title` on the app's display, as a user would by
 * keyboard: type the path into its location field and press Enter — or press Escape when `path` is
 * null. A folder's path is typed without a trailing slash (with one, Enter opens the folder instead
 * of choosing it). WebDriver reaches only the web view, so the dialog is driven through X (xdotool).
 */
export async function answerFileDialog(app, title, path, { shot = null } = {}) {
  // xdotool matches names as regular expressions.
  const name = `^${title.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`;
  const id = await until(() => {
    try { return xdotool(app.display, ["search", "--onlyvisible", "--name", name]).split("\n")[0]; } catch { return null; }
  }, `the "${title}" dialog`, DIALOG_WAIT_MS);
  // There is no window manager under Xvfb: give the dialog the keyboard focus ourselves.
  xdotool(app.display, ["windowraise", id]);
  xdotool(app.display, ["windowfocus", "--sync", id]);
  await new Promise((r) => setTimeout(r, 300));
  if (path === null) {
    xdotool(app.display, ["key", "--clearmodifiers", "Escape"]);
  } else {
    // Ctrl+L opens GTK's location field; the path is typed as a user would.
    xdotool(app.display, ["key", "--clearmodifiers", "ctrl+l"]);
    xdotool(app.display, ["type", "--delay", "15", path]);
    // GTK completes the typed path in a popup; an Enter that lands before the popup settles picks
    // a completion instead of answering the dialog.
    await new Promise((r) => setTimeout(r, DIALOG_SETTLE_MS));
    if (shot) screenshotScreen(app, shot);
    xdotool(app.display, ["key", "--clearmodifiers", "Return"]);
  }
  await until(() => {
    try { xdotool(app.display, ["search", "--onlyvisible", "--name", name]); return false; } catch { return true; }
  }, `the "${title}" dialog to close`, DIALOG_WAIT_MS);
}

/** A screenshot of the whole X screen (native dialogs included, which WebDriver cannot see). */
export function screenshotScreen(app, name) {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const file = path.join(SCREENSHOT_DIR, `${name}.png`);
  execFileSync("import", ["-window", "root", file], { env: { ...process.env, DISPLAY: app.display }, timeout: DIALOG_WAIT_MS });
  console.log(`screenshot: ${path.relative(ROOT, file)}`);
  return file;
}
