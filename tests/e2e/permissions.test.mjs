// The outside-folder setting of a project and a real permission prompt, in the real window with the
// real runtime and the built-in scripted model (it answers `read <path>` with the runtime's read
// tool). By default ("Refuse") a read outside the project is refused and nobody is asked; with
// "Ask me" the window asks, and the answer decides: allowed once, the file is read; rejected, the
// read fails, the reply ends, and the app keeps working.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { attrs, click, launchApp, realRuntime, screenshot, stopApp, textOf, texts, until } from "./harness.mjs";

/** A turn may include the runtime's first start: allow for a slow machine. */
const TURN_MS = 120_000;
/** A file outside every test project, readable by anyone. */
const OUTSIDE_FILE = "/etc/hostname";
const ASSISTANT = '[data-testid="message"][data-role="assistant"]';

describe("reaching outside the project folder (real window, real runtime)", () => {
  realRuntime(); // fails the suite when the runtime binary is missing
  const hostname = readFileSync(OUTSIDE_FILE, "utf8").trim();
  const scratch = mkdtempSync(path.join(os.tmpdir(), "hearth-e2e-perm-"));
  const project = path.join(scratch, "fenced-project");
  let app;

  before(async () => {
    assert.ok(hostname, `${OUTSIDE_FILE} is empty: the test needs its content to recognise it`);
    mkdirSync(project);
    app = await launchApp();
  });
  after(async () => {
    await stopApp(app);
    rmSync(scratch, { recursive: true, force: true });
  });

  const assistantCount = async () => (await attrs(app.browser, ASSISTANT, "data-status")).length;
  const lastStatus = async () => (await attrs(app.browser, ASSISTANT, "data-status")).at(-1);
  const prompts = () => texts(app.browser, '[data-testid="permission-prompt"]');

  /** Send `text` and wait until its reply exists (it is the last assistant message from then on). */
  async function send(text) {
    const before = await assistantCount();
    await (await app.browser.$('[data-testid="composer-input"]')).setValue(text);
    await app.browser.keys("Enter");
    await until(async () => (await assistantCount()) > before, "the reply to start", 20_000);
  }
  /** Wait for the last reply to end as `expected` ("done" or "error"; either when not given). */
  const finished = (expected = null) =>
    until(async () => {
      const status = await lastStatus();
      return expected ? status === expected : ["done", "error"].includes(status);
    }, `the reply to end${expected ? ` ${expected}` : ""}`, TURN_MS);
  const lastText = async () => (await texts(app.browser, `${ASSISTANT} [data-testid="message-text"]`)).at(-1);

  /** The last reply's read tool card, opened: its status and what it shows. */
  async function lastReadCard() {
    const replies = await app.browser.$$(ASSISTANT);
    const card = await replies[replies.length - 1].$('[data-testid="tool-card"][data-tool="read"]');
    await card.waitForExist({ timeout: 10_000 });
    await card.$("button").click();
    const status = await card.getAttribute("data-status");
    const output = await card.$('[data-testid="tool-output"]');
    const error = await card.$('[data-testid="tool-error"]');
    const shown = async (el) => ((await el.isExisting()) ? String(await app.browser.execute((e) => e.innerText, el)) : "");
    return { status, output: await shown(output), error: await shown(error) };
  }

  async function setPolicy(testid, policy) {
    if (!(await (await app.browser.$('[data-testid="project-settings-panel"]')).isExisting())) await click(app.browser, "project-settings");
    await click(app.browser, testid);
    await until(async () => (await attrs(app.browser, '[data-testid="project-settings-panel"]', "data-policy"))[0] === policy, `the project set to ${policy}`);
    assert.match(await textOf(app.browser, "outside-note"), /^Saved\. Takes effect from the next message of each conversation in this project\.$/);
  }

  it("adds a project whose setting is Refuse, and starts a conversation", async () => {
    await click(app.browser, "add-project");
    await (await app.browser.$('[data-testid="project-path"]')).setValue(project);
    await click(app.browser, "project-add-submit");
    await until(async () => (await textOf(app.browser, "project-item")) === "fenced-project", "the project in the sidebar", 20_000);
    await click(app.browser, "project-settings");
    assert.equal((await attrs(app.browser, '[data-testid="project-settings-panel"]', "data-policy"))[0], "deny");
    assert.equal(await (await app.browser.$('[data-testid="outside-deny"]')).isSelected(), true);
    assert.match(await textOf(app.browser, "project-settings-panel"), /When the agent reaches outside this folder:[\s\S]*Refuse[\s\S]*Ask me/);
    await screenshot(app, "project-settings");
    await click(app.browser, "new-conversation");
    await (await app.browser.$('[data-testid="conversation-view"]')).waitForDisplayed({ timeout: 10_000 });
  });

  it("with Refuse, nobody is asked and the read is refused", async () => {
    await send(`read ${OUTSIDE_FILE}`);
    // A prompt would hold the reply until answered: the reply ending unanswered means none was needed.
    await finished();
    assert.deepEqual(await prompts(), []);
    const card = await lastReadCard();
    assert.equal(card.status, "error");
    assert.match(card.error, /prevents you from using this specific tool call/);
    assert.ok(!card.output.includes(hostname));
  });

  it("with Ask me, the window asks which permission and which paths; allowing once reads the file", async () => {
    await setPolicy("outside-ask", "ask");
    await send(`read ${OUTSIDE_FILE}`);
    await (await app.browser.$('[data-testid="permission-prompt"]')).waitForDisplayed({ timeout: TURN_MS });
    assert.equal(await textOf(app.browser, "permission-headline"), "The agent wants to reach outside this project folder.");
    assert.equal(await textOf(app.browser, "permission-name"), "external_directory");
    const paths = await texts(app.browser, '[data-testid="permission-path"]');
    assert.ok(paths.length > 0 && paths.every((p) => p.startsWith(path.dirname(OUTSIDE_FILE))), `paths shown: ${paths}`);
    assert.equal(await textOf(app.browser, "permission-once"), "Allow once");
    assert.equal(await textOf(app.browser, "permission-always"), "Always allow in this conversation");
    assert.equal(await textOf(app.browser, "permission-reject"), "Reject");
    await until(async () => (await lastStatus()) === "streaming", "the reply to wait for the answer", 10_000);
    await screenshot(app, "permission-prompt");

    await click(app.browser, "permission-once");
    await finished("done");
    assert.deepEqual(await prompts(), []);
    const card = await lastReadCard();
    assert.equal(card.status, "done");
    assert.ok(card.output.includes(hostname), `the tool card shows ${OUTSIDE_FILE}'s content: ${card.output}`);
  });

  it("rejecting refuses the read and ends the reply; the app keeps working", async () => {
    await send(`read ${OUTSIDE_FILE}`);
    // "Allow once" allowed one request: this one is asked again.
    await (await app.browser.$('[data-testid="permission-prompt"]')).waitForDisplayed({ timeout: TURN_MS });
    await click(app.browser, "permission-reject");
    await finished();
    assert.deepEqual(await prompts(), []);
    const card = await lastReadCard();
    assert.equal(card.status, "error");
    assert.match(card.error, /rejected permission/);
    assert.ok(!card.output.includes(hostname));
    await screenshot(app, "permission-rejected");

    await send("hello after the refusal");
    await finished("done");
    // The reply's last text may land a moment after the turn ends: wait for what the user reads.
    await until(async () => (await lastText()) === "Scripted reply to: hello after the refusal", "the reply's text", 10_000);
  });
});
