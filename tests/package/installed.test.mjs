// The installed app (from the .deb), through its real window: first start on a fresh home, the
// runtime and ripgrep it carries, the built-in scripted model, a turn that reads a file, and a
// broken bundled runtime. Run by scripts/package-test.sh with HEARTH_APP_BIN=/usr/bin/hearth.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync, mkdtempSync, renameSync, rmSync, statSync, writeFileSync, chmodSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { APP_BIN, attrs, click, launchApp, screenshot, stopApp, textOf, texts, until } from "../e2e/harness.mjs";

const BUNDLED = "/usr/lib/Hearth/bin";
const RUNTIME = path.join(BUNDLED, "opencode");
const TURN_MS = 120_000;
const home = process.env.HEARTH_INSTALLED_DATA_HOME;
const ASSISTANT = '[data-testid="message"][data-role="assistant"]';

/** The installed app as a user starts it: their own home, no data-folder override, started from
 * their home (not from this checkout, whose node_modules holds a runtime too). */
const launchInstalled = () => launchApp({ env: { HOME: home, HEARTH_DATA_DIR: "" }, cwd: home });

describe("the installed app", () => {
  assert.equal(APP_BIN, "/usr/bin/hearth", "run with HEARTH_APP_BIN=/usr/bin/hearth (scripts/package-test.sh does)");
  assert.ok(home, "HEARTH_INSTALLED_DATA_HOME names the throw-away home (scripts/package-test.sh sets it)");
  const scratch = mkdtempSync(path.join(os.tmpdir(), "hearth-installed-"));
  const project = path.join(scratch, "installed-project");
  let app;

  before(async () => {
    mkdirSync(project);
    writeFileSync(path.join(project, "marker.txt"), "PROJECT_2718");
    app = await launchInstalled();
  });
  after(async () => {
    await stopApp(app);
    rmSync(scratch, { recursive: true, force: true });
  });

  it("starts green on the runtime and ripgrep it carries, in a private data folder", async () => {
    await click(app.browser, "nav-runtime");
    await until(async () => (await attrs(app.browser, '[data-testid="runtime-summary"]', "data-ok"))[0] === "true", "a green Runtime view");
    assert.equal(await textOf(app.browser, "runtime-binary-path"), RUNTIME);
    assert.equal(await textOf(app.browser, "runtime-binary-version"), "1.18.33");
    assert.equal(await textOf(app.browser, "ripgrep-path"), path.join(BUNDLED, "rg"));
    const dataDir = path.join(home, ".local/share/hearth");
    assert.equal(await textOf(app.browser, "data-dir"), dataDir);
    assert.equal(statSync(dataDir).mode & 0o777, 0o700, "the data folder is readable by the user only");
    await screenshot(app, "installed-runtime-view");
  });

  it("offers the built-in scripted model on first start", async () => {
    await click(app.browser, "nav-profiles");
    await until(async () => (await texts(app.browser, '[data-testid="profile-card"]')).some((t) => /Built-in scripted model/.test(t)), "the built-in profile");
  });

  it("runs a turn that reads a project file with the bundled runtime", async () => {
    await click(app.browser, "add-project");
    await (await app.browser.$('[data-testid="project-path"]')).setValue(project);
    await click(app.browser, "project-add-submit");
    await click(app.browser, "new-conversation");
    await (await app.browser.$('[data-testid="composer-input"]')).setValue("Read marker.txt");
    await app.browser.keys("Enter");
    await until(async () => (await attrs(app.browser, ASSISTANT, "data-status")).at(-1) === "done", "the reply", TURN_MS);
    assert.equal((await texts(app.browser, `${ASSISTANT} [data-testid="message-text"]`)).at(-1), "PROJECT_2718");
    await screenshot(app, "installed-conversation");
  });

  for (const [what, breakIt, sentence] of [
    ["missing", () => rmSync(RUNTIME), /The OpenCode runtime was not found[\s\S]*reinstall Hearth/],
    ["corrupt", () => { writeFileSync(RUNTIME, Buffer.alloc(4096, 0x5a)); chmodSync(RUNTIME, 0o755); }, /bundled with Hearth\) cannot be used[\s\S]*reinstall Hearth/i],
  ]) {
    it(`says so in the Runtime view when the bundled runtime is ${what}`, async () => {
      await stopApp(app);
      app = null;
      const saved = path.join(scratch, "opencode.saved");
      renameSync(RUNTIME, saved);
      copyFileSync(saved, RUNTIME);
      try {
        breakIt();
        app = await launchInstalled();
        await click(app.browser, "nav-runtime");
        assert.match(await textOf(app.browser, "runtime-binary-problem"), sentence);
        await screenshot(app, `installed-runtime-${what}`);
        // The app stays usable: its conversations are still there.
        await click(app.browser, "project-item");
        await until(async () => (await texts(app.browser, '[data-testid="conversation-item"]')).length === 1, "the stored conversation");
      } finally {
        await stopApp(app);
        app = null;
        renameSync(saved, RUNTIME);
      }
      app = await launchInstalled();
    });
  }
});
