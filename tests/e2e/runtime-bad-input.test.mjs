// Bad runtime installs: each shows a clear sentence in the Runtime view and in the log, and the app
// keeps running (a second check still answers).
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { launchApp, screenshot, stopApp, textOf } from "./harness.mjs";

const scratch = mkdtempSync(path.join(os.tmpdir(), "hearth-bad-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

function readLogs(dataDir) {
  const dir = path.join(dataDir, "logs");
  return readdirSync(dir).map((f) => readFileSync(path.join(dir, f), "utf8")).join("\n");
}

describe("wrong runtime version and missing rg", () => {
  let app;
  after(async () => stopApp(app));

  it("names the version found and the version needed, and says rg is missing", async () => {
    const fake = path.join(scratch, "opencode-old");
    writeFileSync(fake, "#!/bin/sh\necho 1.17.2\n");
    chmodSync(fake, 0o755);
    app = await launchApp({ env: { HEARTH_OPENCODE_BIN: fake, HEARTH_RG_BIN: path.join(scratch, "no-rg") } });
    const problem = await textOf(app.browser, "runtime-binary-problem");
    assert.match(problem, /is version 1\.17\.2, but Hearth needs exactly 1\.18\.33/);
    assert.match(await textOf(app.browser, "ripgrep-problem"), /no-rg does not exist/);
    assert.match(await textOf(app.browser, "runtime-summary"), /2 problems/);
    await screenshot(app, "runtime-view-problems");

    // The app keeps running: checking again answers again.
    await (await app.browser.$('[data-testid="runtime-recheck"]')).click();
    assert.match(await textOf(app.browser, "runtime-binary-problem"), /1\.17\.2/);
    assert.match(readLogs(app.dataDir), /runtime binary check failed.*1\.17\.2/);
  });
});

describe("a runtime file that is not executable", () => {
  let app;
  after(async () => stopApp(app));

  it("says so and names the file", async () => {
    const plain = path.join(scratch, "opencode-plain");
    writeFileSync(plain, "not a program");
    app = await launchApp({ env: { HEARTH_OPENCODE_BIN: plain } });
    const problem = await textOf(app.browser, "runtime-binary-problem");
    assert.match(problem, /from HEARTH_OPENCODE_BIN.*opencode-plain is not executable/);
    assert.equal(await textOf(app.browser, "runtime-binary-path"), plain);
    assert.match(readLogs(app.dataDir), /not executable/);
  });
});
