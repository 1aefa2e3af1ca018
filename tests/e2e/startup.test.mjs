// Starting Hearth when it cannot simply open: a second start on the same data folder (it brings the
// first forward and leaves, the first keeps running), and a data folder it cannot write to (a
// native message says which folder and what to do, and nothing is started).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { APP_BIN, launchApp, screenshotScreen, startXvfb, stopApp, stopChild, until } from "./harness.mjs";

/** How long a start that should end at once may take (the app's start-up checks included). */
const QUICK_EXIT_MS = 30_000;

/** Run the app binary directly (not through tauri-driver) and collect how it ended. */
function startBinary(env) {
  const child = spawn(APP_BIN, [], { env: { ...process.env, GSETTINGS_BACKEND: "memory", RUST_LOG: "info", ...env }, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  const ended = once(child, "exit").then(([code]) => ({ code, stderr }));
  return { child, ended };
}

async function within(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, rej) => (timer = setTimeout(() => rej(new Error(`${what} within ${ms} ms`)), ms)));
  try { return await Promise.race([promise, timeout]); } finally { clearTimeout(timer); }
}

describe("a second start on the same data folder", () => {
  let app;
  before(async () => {
    app = await launchApp({ env: { RUST_LOG: "info" } });
  });
  after(async () => stopApp(app));

  it("brings the first window forward and leaves; the first keeps running", async () => {
    assert.equal(await app.browser.getTitle(), "Hearth");
    const second = startBinary({ DISPLAY: app.display, HEARTH_DATA_DIR: app.dataDir });
    const { code, stderr } = await within(second.ended, QUICK_EXIT_MS, "the second start to end");
    assert.equal(code, 0, stderr);
    assert.match(stderr, /Hearth is already running; its window was brought to the front\./);
    assert.equal(await app.browser.getTitle(), "Hearth", "the first window still answers");
    const logs = () => readdirSync(path.join(app.dataDir, "logs")).map((f) => readFileSync(path.join(app.dataDir, "logs", f), "utf8")).join("");
    await until(() => /a second start of Hearth brought the window forward/.test(logs()), "the first Hearth to log the activation", 10_000);
  });
});

describe("a data folder Hearth cannot write to", () => {
  const scratch = mkdtempSync(path.join(os.tmpdir(), "hearth-e2e-ro-"));
  const ro = path.join(scratch, "ro");
  let xvfb;
  before(async () => {
    mkdirSync(ro);
    // A read-only mount stops root too (permission bits would not); mounting needs root, as CI has.
    const mounted = spawnSync("mount", ["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", ro]);
    assert.equal(mounted.status, 0, `mounting a read-only tmpfs failed (needs root): ${mounted.stderr}`);
    xvfb = await startXvfb();
  });
  after(async () => {
    spawnSync("umount", [ro]);
    await stopChild(xvfb?.xvfb);
    rmSync(scratch, { recursive: true, force: true });
  });

  it("says which folder and what to do in a native message, and starts nothing", async () => {
    const dataDir = path.join(ro, "hearth");
    const start = startBinary({ DISPLAY: xvfb.display, HEARTH_DATA_DIR: dataDir });
    const app = { display: xvfb.display };
    const x = (args) => spawnSync("xdotool", args, { env: { ...process.env, DISPLAY: xvfb.display }, encoding: "utf8" });
    const id = await until(() => x(["search", "--onlyvisible", "--name", "^Hearth cannot start$"]).stdout.trim().split("\n")[0], "the start-up message", QUICK_EXIT_MS);
    screenshotScreen(app, "startup-read-only-data-folder");
    x(["windowfocus", "--sync", id]);
    x(["key", "--clearmodifiers", "Return"]);
    const { code, stderr } = await within(start.ended, QUICK_EXIT_MS, "the app to end after the message");
    assert.equal(code, 1);
    assert.match(stderr, new RegExp(`Hearth cannot write to its data folder ${dataDir}.*HEARTH_DATA_DIR`));
    // Nothing runs in the folder (a runtime would have its private root there).
    const inside = readdirSync("/proc").filter((p) => /^\d+$/.test(p)).filter((p) => {
      try { return readlinkSync(`/proc/${p}/cwd`).startsWith(ro); } catch { return false; }
    });
    assert.deepEqual(inside, [], "no process was started in the data folder");
  });
});
