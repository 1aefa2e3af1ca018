// A long conversation in the real window: it opens at its newest message with only a screenful of
// messages in the page (the list is virtualized), and all of it, the first message included, is
// reachable by scrolling.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { click, launchApp, seedConversation, stopApp, texts, until } from "./harness.mjs";

const MESSAGES = 2000;
/** Far fewer than the conversation holds: what a virtualized list keeps in the page. */
const MAX_IN_PAGE = 120;
const MESSAGE = '[data-testid="message"]';

describe("a conversation of 2,000 messages", () => {
  const scratch = mkdtempSync(path.join(os.tmpdir(), "hearth-e2e-long-"));
  const dataDir = path.join(scratch, "data");
  let app;

  before(async () => {
    seedConversation(dataDir, path.join(scratch, "project"), String(MESSAGES));
    app = await launchApp({ dataDir });
  });
  after(async () => {
    await stopApp(app);
    rmSync(scratch, { recursive: true, force: true });
  });

  const inPage = () => app.browser.execute((sel) => document.querySelectorAll(sel).length, MESSAGE);
  const scrollTo = (where) => app.browser.execute((w) => {
    const el = document.querySelector('[data-testid="conversation-scroll"]');
    el.scrollTop = w === "top" ? 0 : el.scrollHeight;
  }, where);

  it("opens at the newest message with only a screenful in the page", async () => {
    await click(app.browser, "project-item");
    await click(app.browser, "conversation-item");
    const last = `Module ${MESSAGES / 2 - 1}`;
    await until(async () => (await texts(app.browser, `${MESSAGE} [data-testid="message-text"]`)).some((t) => t.startsWith(last)), "the newest reply on screen");
    const n = await inPage();
    assert.ok(n > 0 && n <= MAX_IN_PAGE, `${n} messages in the page`);
  });

  it("reaches the first message by scrolling up, and comes back to the newest", async () => {
    // Heights are measured as messages appear: scroll until the top stays the top.
    await until(async () => {
      await scrollTo("top");
      return (await texts(app.browser, `${MESSAGE} [data-testid="message-text"]`)).some((t) => t.startsWith("Question 0:"));
    }, "the first question on screen", 30_000);
    assert.ok((await inPage()) <= MAX_IN_PAGE);
    await until(async () => {
      await scrollTo("end");
      return (await texts(app.browser, `${MESSAGE} [data-testid="message-text"]`)).some((t) => t.startsWith(`Module ${MESSAGES / 2 - 1}`));
    }, "the newest reply on screen again", 30_000);
  });
});
