// Review and undo in the real window, with the built-in scripted model and the real runtime: a turn
// that writes and edits files shows its changes, opens a diff, is undone (the files on disk go
// back) and redone; the agent's plan shows beside the conversation; a fork opens as its own
// conversation.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { addProject, attrs, click, launchApp, realRuntime, screenshot, setComposer, stopApp, textOf, texts, until } from "./harness.mjs";

/** A turn includes the runtime's first start in a new project: allow for a slow machine. */
const TURN_MS = 120_000;
const ASSISTANT = '[data-testid="message"][data-role="assistant"]';

describe("reviewing and undoing the agent's changes in the real window", () => {
  realRuntime(); // fails the suite when the runtime binary is missing
  const scratch = mkdtempSync(path.join(os.tmpdir(), "hearth-e2e-changes-"));
  const project = path.join(scratch, "edit-project");
  const dataDir = path.join(scratch, "data");
  const file = (name) => path.join(project, name);
  let app;

  before(async () => {
    mkdirSync(project);
    mkdirSync(dataDir);
    writeFileSync(file("c.txt"), "alpha\nbeta\n");
    app = await launchApp({ dataDir });
    await addProject(app.browser, project);
    await click(app.browser, "new-conversation");
    await (await app.browser.$('[data-testid="conversation-view"]')).waitForDisplayed({ timeout: 10_000 });
  });
  after(async () => {
    await stopApp(app);
    rmSync(scratch, { recursive: true, force: true });
  });

  /** Send a message of several lines (typing a newline would send the first line alone). */
  async function send(text) {
    await setComposer(app.browser, text);
    await click(app.browser, "send-button");
  }
  const lastReplyDone = async (n) => {
    const statuses = await attrs(app.browser, ASSISTANT, "data-status");
    return statuses.length === n && statuses.at(-1) === "done";
  };

  it("shows what a turn changed and opens a file's diff, unified and side by side", async () => {
    await send("write notes/a.txt hello\\nworld\nedit c.txt beta -> gamma");
    await until(() => lastReplyDone(1), "the editing reply to finish", TURN_MS);
    await until(async () => (await textOf(app.browser, "changes-summary")).startsWith("2 files changed"), "the change list", 20_000);
    assert.equal(await textOf(app.browser, "changes-summary"), "2 files changed +3 −1");
    assert.deepEqual(await attrs(app.browser, '[data-testid="changed-file"]', "data-path"), ["c.txt", "notes/a.txt"]);
    assert.equal(readFileSync(file("c.txt"), "utf8"), "alpha\ngamma\n");

    await (await app.browser.$('[data-testid="changed-file"][data-path="c.txt"]')).click();
    await (await app.browser.$('[data-testid="diff-lines"]')).waitForDisplayed({ timeout: 20_000 });
    const unified = await texts(app.browser, '[data-testid="diff-lines"] tr[data-kind]');
    assert.deepEqual(unified.map((row) => row.replace(/\s+/g, " ").trim()), ["1 1 alpha", "2 − beta", "2 + gamma"]);
    await screenshot(app, "diff-unified");
    await click(app.browser, "diff-split");
    await until(async () => (await texts(app.browser, '[data-testid="diff-lines"] td.line.removed')).join() === "beta", "the side-by-side layout");
    assert.deepEqual(await texts(app.browser, '[data-testid="diff-lines"] td.line.added'), ["gamma"]);
    await screenshot(app, "diff-side-by-side");
    await click(app.browser, "diff-close");
  });

  it("undoes the turn: the files on disk go back and the turn is shown undone; redo brings it back", async () => {
    await click(app.browser, "undo-turn");
    await until(async () => (await attrs(app.browser, '[data-testid="turn-changes"]', "data-state")).at(-1) === "undone", "the turn shown undone", 20_000);
    assert.equal(readFileSync(file("c.txt"), "utf8"), "alpha\nbeta\n");
    assert.equal(existsSync(file("notes/a.txt")), false);
    assert.equal(existsSync(file("notes")), false);
    assert.deepEqual(await attrs(app.browser, '[data-testid="message"]', "data-undone"), ["true", "true"], "the turn stays, greyed");
    await screenshot(app, "turn-undone");

    await click(app.browser, "redo-turns");
    await until(async () => (await attrs(app.browser, '[data-testid="turn-changes"]', "data-state")).at(-1) === "kept", "the turn back", 20_000);
    assert.equal(readFileSync(file("c.txt"), "utf8"), "alpha\ngamma\n");
    assert.equal(readFileSync(file("notes/a.txt"), "utf8"), "hello\nworld");
  });

  it("refuses to overwrite a file the user edited after the turn, and names it", async () => {
    writeFileSync(file("c.txt"), "edited by the user\n");
    await click(app.browser, "undo-turn");
    assert.match(await textOf(app.browser, "undo-conflict"), /c\.txt \(edited since\)/);
    assert.equal(readFileSync(file("c.txt"), "utf8"), "edited by the user\n");
    assert.equal(existsSync(file("notes/a.txt")), true, "nothing was undone");
    await screenshot(app, "undo-conflict");
  });

  it("names a 50 MB generated file too large to show, and stays responsive", async () => {
    await send("run head -c 50000000 /dev/zero | tr '\\0' 'x' | fold -w 100 > big.txt");
    await until(() => lastReplyDone(2), "the generating reply to finish", TURN_MS);
    await (await app.browser.$('[data-testid="changed-file"][data-path="big.txt"]')).click();
    assert.match(await textOf(app.browser, "diff-too-large"), /too large to show/);
    await click(app.browser, "diff-close");
  });

  it("shows the agent's plan with its progress, lists every change and forks from a reply", async () => {
    await send("plan: [x] read the code; [~] change it; run the tests");
    await until(() => lastReplyDone(3), "the planning reply to finish", TURN_MS);
    assert.equal(await textOf(app.browser, "plan-progress"), "1 of 3 done");
    assert.deepEqual(await attrs(app.browser, '[data-testid="plan-step"]', "data-status"), ["completed", "inProgress", "pending"]);
    await click(app.browser, "changes-button");
    assert.deepEqual(await texts(app.browser, '[data-testid="changes-panel-file"]'), ["c.txt", "notes/a.txt", "big.txt"]);
    await screenshot(app, "plan-and-changes");

    const forks = await app.browser.$$('[data-testid="fork-here"]');
    await forks[0].click();
    await until(async () => {
      const failed = await texts(app.browser, '[data-testid="action-error"]');
      if (failed.length) throw new Error(failed[0]);
      return (await textOf(app.browser, "conversation-title")).endsWith("(fork)");
    }, "the fork opened");
    await until(async () => (await texts(app.browser, '[data-testid="message"]')).length === 2, "the fork's two messages", 20_000);
    await screenshot(app, "fork-opened");
  });
});
