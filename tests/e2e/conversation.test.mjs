// The everyday flow in the real window with the built-in scripted model and the real runtime: add a
// project, converse (tool card, streamed reply), attach an image, cancel a held turn, restart.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { addProject, attrs, click, launchApp, realRuntime, ROOT, screenshot, stopApp, textOf, texts, until } from "./harness.mjs";

/** A turn includes the runtime's first start in a new project: allow for a slow machine. */
const TURN_MS = 120_000;
const PNG_B64 = readFileSync(path.join(ROOT, "fixtures/images/ember-64x48.png")).toString("base64");
const ASSISTANT = '[data-testid="message"][data-role="assistant"]';
const lastStatus = async (browser) => (await attrs(browser, ASSISTANT, "data-status")).at(-1);

describe("a conversation in the real window", () => {
  realRuntime(); // fails the suite when the runtime binary is missing
  const scratch = mkdtempSync(path.join(os.tmpdir(), "hearth-e2e-conv-"));
  const project = path.join(scratch, "demo-project");
  const dataDir = path.join(scratch, "data");
  let app;

  before(async () => {
    const fs = await import("node:fs");
    fs.mkdirSync(project);
    fs.mkdirSync(dataDir);
    writeFileSync(path.join(project, "marker.txt"), "PROJECT_4711");
    app = await launchApp({ dataDir });
  });
  after(async () => {
    await stopApp(app);
    rmSync(scratch, { recursive: true, force: true });
  });

  const assistantMessages = () => app.browser.$$('[data-testid="message"][data-role="assistant"]');
  const lastAssistant = async () => {
    const all = await assistantMessages();
    return all[all.length - 1];
  };

  it("adds a project and starts a conversation", async () => {
    await addProject(app.browser, project);
    await click(app.browser, "new-conversation");
    await (await app.browser.$('[data-testid="conversation-view"]')).waitForDisplayed({ timeout: 10_000 });
  });

  it("streams a reply that read marker.txt with the runtime's read tool", async () => {
    const input = await app.browser.$('[data-testid="composer-input"]');
    await input.setValue("Read marker.txt");
    await app.browser.keys("Enter");
    await until(async () => (await lastStatus(app.browser)) === "done", "the reply to finish", TURN_MS);
    // The runtime may end the turn a moment before the reply's last text lands (it then arrives
    // with the stored message): wait for what the user reads, not for the first "done".
    const replyText = async () => (await texts(app.browser, `${ASSISTANT} [data-testid="message-text"]`)).at(-1);
    await until(async () => (await replyText()) !== "", "the reply's text", 10_000);
    assert.equal(await replyText(), "PROJECT_4711");
    const reply = await lastAssistant();
    const card = await reply.$('[data-testid="tool-card"]');
    assert.equal(await card.getAttribute("data-tool"), "read");
    assert.equal(await card.getAttribute("data-status"), "done");
    await card.$("button").click();
    assert.match(await (await card.$('[data-testid="tool-output"]')).getText(), /PROJECT_4711/);
    await screenshot(app, "conversation-view");
  });

  it("shows an attached image as a thumbnail before and after sending", async () => {
    await app.browser.execute((b64) => {
      const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
      const file = new File([bytes], "pixel.png", { type: "image/png" });
      const dt = new DataTransfer();
      dt.items.add(file);
      const ev = new ClipboardEvent("paste", { clipboardData: dt, bubbles: true, cancelable: true });
      document.querySelector('[data-testid="composer-input"]').dispatchEvent(ev);
    }, PNG_B64);
    await (await app.browser.$('[data-testid="staged-thumbnail"]')).waitForDisplayed({ timeout: 20_000 });
    await (await app.browser.$('[data-testid="composer-input"]')).setValue("What is in this image?");
    await app.browser.keys("Enter");
    const thumb = await app.browser.$('[data-testid="message"][data-role="user"] [data-testid="message-thumbnail"]');
    await thumb.waitForDisplayed({ timeout: 20_000 });
    assert.match(await thumb.getAttribute("src"), /^data:image\/png;base64,/);
    await until(async () => (await lastStatus(app.browser)) === "done", "the image turn to finish", TURN_MS);
  });

  it("cancels a turn held by the scripted model", async () => {
    await (await app.browser.$('[data-testid="composer-input"]')).setValue("[hold] take your time");
    await app.browser.keys("Enter");
    await (await app.browser.$('[data-testid="cancel-button"]')).waitForDisplayed({ timeout: 20_000 });
    // The built-in model streams a notice before it holds the reply: the request reached it.
    const held = async () => (await texts(app.browser, `${ASSISTANT} [data-testid="message-text"]`)).at(-1) ?? "";
    await until(async () => (await held()).includes("Holding this reply until you press Stop."), "the held reply's notice", TURN_MS);
    await click(app.browser, "cancel-button");
    await until(async () => (await lastStatus(app.browser)) === "cancelled", "the turn to be cancelled", 30_000);
    assert.equal(await textOf(app.browser, "message-cancelled"), "Stopped.");
    await (await app.browser.$('[data-testid="send-button"]')).waitForDisplayed({ timeout: 10_000 });
  });

  /** Each rendered message's status and text, read in one go (the list re-renders as it scrolls),
   * and whether the user can see it: the list keeps a message it has not measured yet hidden (its
   * text then reads as empty) until the frame after it is laid out. */
  const rendered = () =>
    app.browser.execute(() =>
      Array.from(document.querySelectorAll('[data-testid="message"]')).map((m) => ({
        status: m.getAttribute("data-status"),
        text: m.querySelector('[data-testid="message-text"]')?.innerText.trim() ?? null,
        shown: getComputedStyle(m).visibility !== "hidden",
      })),
    );

  /** The list is virtualized: from its top, all six messages are within what it renders. Waits
   * for what is compared — six messages on screen, each with its text — and returns them. */
  const showAllSix = async () => {
    await app.browser.execute(() => document.querySelector('[data-testid="conversation-scroll"]').scrollTo({ top: 0 }));
    let seen = [];
    await until(async () => {
      seen = await rendered();
      return seen.length === 6 && seen.every((m) => m.shown && m.text !== null);
    }, "6 messages on screen with their texts", 20_000);
    return seen.map(({ status, text }) => ({ status, text }));
  };

  it("finds the conversation intact after a restart", async () => {
    const before = await showAllSix();
    const beforeStatus = before.map((m) => m.status);
    await stopApp(app);
    app = await launchApp({ dataDir });
    await click(app.browser, "project-item");
    await click(app.browser, "conversation-item");
    await until(async () => (await texts(app.browser, '[data-testid="message"]')).length >= 1, "the messages after restart", 20_000);
    const after = await showAllSix();
    assert.deepEqual(after, before);
    assert.equal(beforeStatus.at(-1), "cancelled");
    await click(app.browser, "nav-profiles");
    await (await app.browser.$('[data-testid="profile-card"]')).waitForDisplayed({ timeout: 10_000 });
    await click(app.browser, "profile-test");
    assert.match(await textOf(app.browser, "profile-test-result"), /The model answered in \d+ ms/);
    await screenshot(app, "profiles-view");
  });
});
