// Bad input in the real window: each gets a clear sentence where the user is looking, nothing the
// user typed is lost, and the app stays responsive.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, mkdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { click, launchApp, realRuntime, stopApp, textOf, until } from "./harness.mjs";

describe("bad input in the real window", () => {
  realRuntime();
  const scratch = mkdtempSync(path.join(os.tmpdir(), "hearth-e2e-bad-"));
  const project = path.join(scratch, "proj");
  let app;

  before(async () => {
    mkdirSync(project);
    app = await launchApp();
    await click(app.browser, "add-project");
    await (await app.browser.$('[data-testid="project-path"]')).setValue(project);
    await click(app.browser, "project-add-submit");
    await until(async () => (await textOf(app.browser, "project-item")) === "proj", "the project", 20_000);
    await click(app.browser, "new-conversation");
  });
  after(async () => {
    await stopApp(app);
    rmSync(scratch, { recursive: true, force: true });
  });

  const paste = (name, type, size, fill) =>
    app.browser.execute((n, t, sz, f) => {
      const file = new File([new Uint8Array(sz).fill(f)], n, { type: t });
      const dt = new DataTransfer();
      dt.items.add(file);
      document.querySelector('[data-testid="composer-input"]').dispatchEvent(new ClipboardEvent("paste", { clipboardData: dt, bubbles: true, cancelable: true }));
    }, name, type, size, fill);

  it("refuses a 60 MB photo and a corrupt image with a sentence", async () => {
    await paste("huge.jpg", "image/jpeg", 60 * 1024 * 1024, 0xff);
    assert.match(await textOf(app.browser, "attach-error"), /huge\.jpg is larger than 20 MiB/);
    await paste("broken.png", "image/png", 1000, 0x42);
    await until(async () => /broken\.png is not an image Hearth can read/.test(await textOf(app.browser, "attach-error")), "the corrupt image sentence", 20_000);
  });

  it("keeps 5 MB of pasted text in the box when it is refused", async () => {
    const big = "x".repeat(5 * 1024 * 1024);
    await app.browser.execute((t) => {
      const input = document.querySelector('[data-testid="composer-input"]');
      input.value = t;
      input.dispatchEvent(new Event("input", { bubbles: true }));
    }, big);
    await click(app.browser, "send-button");
    assert.match(await textOf(app.browser, "action-error"), /too long|limit|MiB|MB/i);
    const kept = await app.browser.execute(() => document.querySelector('[data-testid="composer-input"]').value.length);
    assert.equal(kept, big.length, "the text stays in the box");
  });

  it("refuses a model profile with a malformed URL, and stays responsive", async () => {
    await click(app.browser, "nav-profiles");
    await click(app.browser, "add-profile");
    const form = await app.browser.$('[data-testid="profile-form"]');
    const inputs = await form.$$("input");
    await inputs[0].setValue("Broken");
    await inputs[1].setValue("not a url");
    await inputs[2].setValue("m");
    await (await form.$('button[type="submit"]')).click();
    // The refusal renders after the save round-trip: wait for it rather than read at once.
    const alert = await until(
      async () => app.browser.execute(() => document.querySelector('[data-testid="profiles-view"] [role="alert"]')?.innerText ?? ""),
      "the refusal sentence",
      20_000,
    );
    assert.match(alert, /URL|http/i);
    await click(app.browser, "nav-runtime");
    await (await app.browser.$('[data-testid="runtime-summary"]')).waitForDisplayed({ timeout: 30_000 });
  });
});
