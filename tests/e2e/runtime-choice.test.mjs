// Choosing the runtime binary in the Runtime view, through the native file dialog: a file that is
// not the pinned runtime is refused with the locator's sentence — in the Runtime view and in a
// reply — and the app keeps working; clearing the choice brings the runtime back.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { answerFileDialog, attrs, click, launchApp, realRuntime, screenshot, stopApp, textOf, texts, until } from "./harness.mjs";

/** A turn may include the runtime's first start: allow for a slow machine. */
const TURN_MS = 120_000;
const DIALOG_TITLE = "Choose the OpenCode runtime binary";
const ASSISTANT = '[data-testid="message"][data-role="assistant"]';

describe("choosing the runtime binary (real window, real runtime binary)", () => {
  const runtime = realRuntime(); // fails the suite when the runtime binary is missing
  const scratch = mkdtempSync(path.join(os.tmpdir(), "hearth-e2e-choice-"));
  const project = path.join(scratch, "choice-project");
  const impostor = path.join(scratch, "opencode-old");
  let app;

  before(async () => {
    mkdirSync(project);
    writeFileSync(path.join(project, "marker.txt"), "PROJECT_31");
    writeFileSync(impostor, "#!/bin/sh\necho 1.17.2\n");
    chmodSync(impostor, 0o755);
    // An environment path would outrank the choice: this test is about the choice alone.
    app = await launchApp({ env: { HEARTH_OPENCODE_BIN: "" } });
  });
  after(async () => {
    await stopApp(app);
    rmSync(scratch, { recursive: true, force: true });
  });

  const lastStatus = async () => (await attrs(app.browser, ASSISTANT, "data-status")).at(-1);
  const count = async () => (await attrs(app.browser, ASSISTANT, "data-status")).length;
  /** Send `text` and wait for its reply to end as `expected`. */
  async function send(text, expected) {
    const before = await count();
    await (await app.browser.$('[data-testid="composer-input"]')).setValue(text);
    await app.browser.keys("Enter");
    await until(async () => (await count()) > before && (await lastStatus()) === expected, `the reply to end ${expected}`, TURN_MS);
  }
  const lastText = async () => (await texts(app.browser, `${ASSISTANT} [data-testid="message-text"]`)).at(-1);

  it("starts on the runtime Hearth finds itself", async () => {
    assert.equal(await textOf(app.browser, "runtime-binary-path"), runtime.bin);
    assert.match(await textOf(app.browser, "runtime-choice-auto"), /Hearth finds the runtime itself/);
  });

  it("refuses a chosen file that is another version, with what is wrong and what to do", async () => {
    await click(app.browser, "runtime-choose");
    await answerFileDialog(app, DIALOG_TITLE, impostor, { shot: "native-runtime-binary-dialog" });
    await until(async () => (await textOf(app.browser, "runtime-choice-path")) === impostor, "the choice shown");
    const problem = await textOf(app.browser, "runtime-binary-problem");
    assert.match(problem, /is version 1\.17\.2, but Hearth needs exactly 1\.18\.33/);
    assert.match(problem, /Choose the binary of opencode-ai@1\.18\.33 in the Runtime view, or clear your choice there/);
    assert.equal(await textOf(app.browser, "runtime-binary-path"), impostor);
    assert.equal(await textOf(app.browser, "runtime-summary"), "The runtime cannot start: 1 problem to fix");
    await screenshot(app, "runtime-choice-refused");
  });

  it("keeps working: a message gets the same sentence as its reply", async () => {
    await click(app.browser, "add-project");
    await (await app.browser.$('[data-testid="project-path"]')).setValue(project);
    await click(app.browser, "project-add-submit");
    await until(async () => (await texts(app.browser, '[data-testid="project-item"]')).includes("choice-project"), "the project", 20_000);
    await click(app.browser, "new-conversation");
    await send("Read marker.txt", "error");
    assert.match((await texts(app.browser, '[data-testid="message-error"]')).at(-1), /opencode-old is version 1\.17\.2/);
  });

  it("clearing the choice brings the runtime back", async () => {
    await click(app.browser, "nav-runtime");
    await click(app.browser, "runtime-choice-clear");
    await until(async () => (await textOf(app.browser, "runtime-binary-path")) === runtime.bin, "the runtime Hearth finds itself");
    assert.equal(await textOf(app.browser, "runtime-binary-version"), runtime.pinned);
    assert.match(await textOf(app.browser, "runtime-summary"), /^Runtime ready/);
    assert.match(await textOf(app.browser, "runtime-choice-auto"), /Hearth finds the runtime itself/);
    await screenshot(app, "runtime-choice-cleared");

    await click(app.browser, "conversation-item"); // the project is still open in the sidebar
    await send("Read marker.txt", "done");
    // The reply's last text may land a moment after the turn ends: wait for what the user reads.
    await until(async () => (await lastText()) === "PROJECT_31", "the reply's text", 10_000);
    await click(app.browser, "nav-runtime");
    assert.match(await textOf(app.browser, "runtime-processes"), /started 1×/);
  });
});
