// Choosing the runtime in the real window: a project runs on Claude Code (an ACP agent that is not
// OpenCode, against the built-in model, offline), a message streams and reads the project's file
// with Claude's own tool, a held reply streams its notice and is cancelled; a second conversation
// of the project is switched to OpenCode's ACP agent before its first message and keeps it after;
// the Runtime view shows both agents running.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { addProject, attrs, click, launchApp, realClaudeAgent, realRuntime, screenshot, stopApp, textOf, texts, until } from "./harness.mjs";

/** A turn includes the agent's first start (and Claude Code's first session process). */
const TURN_MS = 120_000;
const ASSISTANT = '[data-testid="message"][data-role="assistant"]';

describe("a project on an ACP agent (real window, real agents)", () => {
  realRuntime(); // fails the suite when the runtime binary is missing
  const claude = realClaudeAgent(); // fails when the adapter is missing, unless opted out
  const agent = claude ? { key: "acp:claude-code", name: "Claude Code" } : { key: "acp:opencode", name: "OpenCode (ACP)" };
  if (!claude) console.log("NOT RUN on Claude Code (HEARTH_SKIP_AGENT_TESTS=1): the project uses OpenCode's ACP agent");
  const scratch = mkdtempSync(path.join(os.tmpdir(), "hearth-e2e-acp-"));
  const project = path.join(scratch, "agent-project");
  let app;

  before(async () => {
    mkdirSync(project);
    writeFileSync(path.join(project, "marker.txt"), "PROJECT_5150");
    app = await launchApp();
  });
  after(async () => {
    await stopApp(app);
    rmSync(scratch, { recursive: true, force: true });
  });

  const statuses = async () => attrs(app.browser, ASSISTANT, "data-status");
  const lastText = async () => (await texts(app.browser, `${ASSISTANT} [data-testid="message-text"]`)).at(-1) ?? "";
  async function send(text) {
    const before = (await statuses()).length;
    await (await app.browser.$('[data-testid="composer-input"]')).setValue(text);
    await app.browser.keys("Enter");
    await until(async () => (await statuses()).length > before, "the reply to start");
  }

  it("chooses the agent for the project in its settings", async () => {
    await addProject(app.browser, project);
    await click(app.browser, "project-settings");
    const select = await app.browser.$('[data-testid="project-runtime"]');
    await select.waitForDisplayed({ timeout: 10_000 });
    await until(async () => (await select.$(`option[value="${agent.key}"]`).isExisting()) && (await select.$(`option[value="${agent.key}"]`).isEnabled()), `${agent.name} offered`);
    await select.selectByAttribute("value", agent.key);
    await until(async () => (await textOf(app.browser, "runtime-note")).startsWith("Saved."), "the choice saved");
    await screenshot(app, "acp-project-runtime");
  });

  it("runs a conversation there: the reply reads the file with the agent's own tool", async () => {
    await click(app.browser, "new-conversation");
    await (await app.browser.$('[data-testid="conversation-view"]')).waitForDisplayed({ timeout: 10_000 });
    const choice = await app.browser.$('[data-testid="conversation-runtime-select"]');
    assert.match(await choice.$("option").getText(), new RegExp(`Project's \\(${agent.name.replace(/[()]/g, "\\$&")}\\)`));
    await send("read marker.txt");
    await until(async () => (await statuses()).at(-1) === "done", "the reply to finish", TURN_MS);
    await until(async () => (await lastText()).includes("PROJECT_5150"), "the marker in the reply", 10_000);
    const card = await app.browser.$(`${ASSISTANT}:last-child [data-testid="tool-card"]`);
    assert.equal(await card.getAttribute("data-tool"), "read");
    assert.equal(await card.getAttribute("data-status"), "done");
    assert.equal(await (await app.browser.$('[data-testid="conversation-runtime"]')).getAttribute("data-choice"), agent.key, "the conversation keeps its agent");
    // ACP has no request to compact, forget turns or copy a session: the window does not offer them.
    await until(async () => !(await app.browser.$('[data-testid="compact-button"]').isExisting()), "no Compact on an ACP agent");
    assert.equal(await app.browser.$('[data-testid="fork-here"]').isExisting(), false, "no Fork on an ACP agent");
    await screenshot(app, "acp-conversation");
  });

  it("streams a held reply's notice, and Stop cancels it", async () => {
    await send("[hold] take your time");
    await until(async () => (await lastText()).includes("Holding this reply until you press Stop."), "the streamed notice", TURN_MS);
    assert.equal((await statuses()).at(-1), "streaming");
    await click(app.browser, "cancel-button");
    await until(async () => (await statuses()).at(-1) === "cancelled", "the turn to be cancelled", 30_000);
    await (await app.browser.$('[data-testid="send-button"]')).waitForDisplayed({ timeout: 10_000 });
  });

  it("a new conversation may choose another runtime before its first message", async () => {
    await click(app.browser, "new-conversation");
    const choice = await app.browser.$('[data-testid="conversation-runtime-select"]');
    await choice.waitForDisplayed({ timeout: 10_000 });
    const other = agent.key === "acp:opencode" ? "opencode" : "acp:opencode";
    await choice.selectByAttribute("value", other);
    await until(async () => (await choice.getValue()) === other, "the conversation's own choice");
    await send("read marker.txt");
    await until(async () => (await statuses()).at(-1) === "done", "the reply to finish", TURN_MS);
    await until(async () => (await lastText()).includes("PROJECT_5150"), "the marker in the reply", 10_000);
    assert.equal(await (await app.browser.$('[data-testid="conversation-runtime"]')).getAttribute("data-choice"), other);
  });

  it("the Runtime view shows the agent running, with its version", async () => {
    await click(app.browser, "nav-runtime");
    const row = await app.browser.$(`[data-testid="agent-row"][data-choice="${agent.key}"]`);
    await row.waitForDisplayed({ timeout: 30_000 });
    await until(async () => (await row.$('[data-testid="agent-process"]').isExisting()), `${agent.name}'s process listed`);
    assert.match(await row.$('[data-testid="agent-process"]').getText(), /^running · pid \d+/);
    assert.match(await row.$('[data-testid="agent-abilities"]').getText(), /version \S+/);
    await screenshot(app, "acp-runtime-view");
  });
});
