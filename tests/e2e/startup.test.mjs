// Starting Hearth when it cannot simply open: a second start on the same data folder (it brings the
// first forward and leaves, the first keeps running), a data folder it cannot write to, and files in
// it Hearth cannot use — a damaged secrets file, a database from a newer Hearth, a database whose
// upgrade fails (a native message says which file and what to do, the file keeps every byte, and
// nothing is started).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { APP_BIN, NO_KEYRING_ENV, launchApp, screenshotScreen, seedConversation, startXvfb, stopApp, stopChild, until } from "./harness.mjs";

/** How long a start that should end at once may take (the app's start-up checks included). */
const QUICK_EXIT_MS = 30_000;

/** Run the app binary directly (not through tauri-driver) and collect how it ended. */
function startBinary(env) {
  const child = spawn(APP_BIN, [], { env: { ...process.env, ...NO_KEYRING_ENV, GSETTINGS_BACKEND: "memory", RUST_LOG: "info", ...env }, stdio: ["ignore", "ignore", "pipe"] });
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
    const { code, stderr } = await answerStartupMessage(xvfb.display, start, "startup-read-only-data-folder");
    assert.equal(code, 1);
    assert.match(stderr, new RegExp(`Hearth cannot write to its data folder ${dataDir}.*HEARTH_DATA_DIR`));
    assert.deepEqual(processesIn(ro), [], "no process was started in the data folder");
  });
});

/** Wait for the native "Hearth cannot start" message, screenshot it, press its button, and wait for the app to end. */
async function answerStartupMessage(display, start, shot) {
  const x = (args) => spawnSync("xdotool", args, { env: { ...process.env, DISPLAY: display }, encoding: "utf8" });
  const id = await until(() => x(["search", "--onlyvisible", "--name", "^Hearth cannot start$"]).stdout.trim().split("\n")[0], "the start-up message", QUICK_EXIT_MS);
  screenshotScreen({ display }, shot);
  x(["windowfocus", "--sync", id]);
  x(["key", "--clearmodifiers", "Return"]);
  return within(start.ended, QUICK_EXIT_MS, "the app to end after the message");
}

/** Processes whose working folder is inside `dir` (a runtime would have its private root there). */
function processesIn(dir) {
  return readdirSync("/proc").filter((p) => /^\d+$/.test(p)).filter((p) => {
    try { return readlinkSync(`/proc/${p}/cwd`).startsWith(dir); } catch { return false; }
  });
}

/** SQLite keeps PRAGMA user_version as a big-endian 32-bit number at byte 60 of the file header. */
const USER_VERSION_OFFSET = 60;
/** A database version no Hearth has reached. */
const FAR_NEWER_VERSION = 9999;
/** The version before "add_conversation_settings_and_usage" (the third step in store/schema.rs). */
const BEFORE_THIRD_STEP = 2;

describe("files in the data folder Hearth cannot use", () => {
  let xvfb;
  let scratch;
  before(async () => {
    scratch = mkdtempSync(path.join(os.tmpdir(), "hearth-e2e-files-"));
    xvfb = await startXvfb();
  });
  after(async () => {
    await stopChild(xvfb?.xvfb);
    rmSync(scratch, { recursive: true, force: true });
  });

  /** A data folder holding a current database, written by Hearth's own store (the seed example). */
  function seededDataDir(name) {
    const dataDir = path.join(scratch, name);
    seedConversation(dataDir, path.join(scratch, `${name}-project`), "2");
    const db = path.join(dataDir, "hearth.sqlite3");
    assert.ok(!existsSync(`${db}-wal`), "the seeded database was closed cleanly");
    return { dataDir, db };
  }

  function setUserVersion(file, version) {
    const bytes = readFileSync(file);
    bytes.writeUInt32BE(version, USER_VERSION_OFFSET);
    writeFileSync(file, bytes);
  }

  /** Start Hearth on `dataDir`, answer its message, and check what every refusal promises. */
  async function refusedStart(dataDir, file, shot) {
    const before = readFileSync(file);
    const start = startBinary({ DISPLAY: xvfb.display, HEARTH_DATA_DIR: dataDir });
    const { code, stderr } = await answerStartupMessage(xvfb.display, start, shot);
    assert.equal(code, 1, stderr);
    assert.ok(stderr.includes(file), `the message names ${file}: ${stderr}`);
    assert.ok(readFileSync(file).equals(before), "the file keeps every byte");
    assert.ok(!existsSync(path.join(dataDir, "knowledge.sqlite3")), "nothing past the refused file was started");
    assert.deepEqual(processesIn(dataDir), [], "no process was started in the data folder");
    return stderr;
  }

  it("names a damaged secrets file, says what to do, and leaves it as it was", async () => {
    const dataDir = path.join(scratch, "damaged-secrets");
    mkdirSync(dataDir);
    const file = path.join(dataDir, "secrets.json");
    writeFileSync(file, '{\n  "profile:1": "sk-half-written', { mode: 0o600 });
    const stderr = await refusedStart(dataDir, file, "startup-damaged-secrets-file");
    assert.match(stderr, /secrets file .* is damaged: it is not a valid list of secrets \(line 2, column \d+\)\..*Restore it from a backup, or move it out of the data folder/);
    assert.ok(!stderr.includes("sk-half-written"), "the message quotes no secret");
  });

  it("names a database written by a newer Hearth, says what to do, and leaves it as it was", async () => {
    const { dataDir, db } = seededDataDir("newer-database");
    setUserVersion(db, FAR_NEWER_VERSION);
    const stderr = await refusedStart(dataDir, db, "startup-newer-database");
    assert.match(stderr, new RegExp(`was written by a newer version of Hearth \\(database version ${FAR_NEWER_VERSION}; this version understands up to \\d+\\)\\..*move the file out of the data folder`));
  });

  it("names a database whose upgrade fails, says what to do, and leaves it as it was", async () => {
    // A current file marked as version 2: the third step adds conversations.profile_id, which the
    // table already has, so SQLite refuses the step.
    const { dataDir, db } = seededDataDir("failed-upgrade");
    setUserVersion(db, BEFORE_THIRD_STEP);
    const stderr = await refusedStart(dataDir, db, "startup-failed-upgrade");
    assert.match(stderr, /could not upgrade its database .* \(step "add_conversation_settings_and_usage" failed: duplicate column name: profile_id.*\)\. The file was left as it was\. Restore it from a backup/);
  });
});
