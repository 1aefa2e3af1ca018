// Bad input in the real window: each gets a clear sentence where the user is looking, nothing the
// user typed is lost, and the app stays responsive.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { attrs, click, launchApp, realRuntime, ROOT, screenshot, setComposer, stopApp, textOf, texts, until } from "./harness.mjs";

/** A PNG whose header claims 100000×100000 pixels (30 GB decoded) in 83 bytes. */
const BOMB_B64 = readFileSync(path.join(ROOT, "fixtures/images/claims-100000x100000.png")).toString("base64");
/** A valid 1×1 BMP: a real image in a format Hearth does not take. */
const BMP_B64 = Buffer.from("424d3a000000000000003600000028000000010000000100000001001800000000000400000000000000000000000000000000000000ff000000", "hex").toString("base64");

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

  /** Paste a file into the composer: `bytes` is base64, or a size filled with one byte value. */
  const paste = (name, type, bytes) =>
    app.browser.execute((n, t, b) => {
      const data = typeof b === "string" ? Uint8Array.from(atob(b), (c) => c.charCodeAt(0)) : new Uint8Array(b.size).fill(b.fill);
      const dt = new DataTransfer();
      dt.items.add(new File([data], n, { type: t }));
      document.querySelector('[data-testid="composer-input"]').dispatchEvent(new ClipboardEvent("paste", { clipboardData: dt, bubbles: true, cancelable: true }));
    }, name, type, bytes);

  /** Fill and save the Models view's new-profile form. */
  async function addProfile(name, baseUrl, model) {
    await click(app.browser, "nav-profiles");
    await click(app.browser, "add-profile");
    const form = await app.browser.$('[data-testid="profile-form"]');
    const [nameInput, urlInput, modelInput] = await form.$$("input");
    await nameInput.setValue(name);
    await urlInput.setValue(baseUrl);
    await modelInput.setValue(model);
    await (await form.$('button[type="submit"]')).click();
  }

  it("refuses a 60 MB photo and a corrupt image with a sentence", async () => {
    await paste("huge.jpg", "image/jpeg", { size: 60 * 1024 * 1024, fill: 0xff });
    assert.match(await textOf(app.browser, "attach-error"), /huge\.jpg is larger than 20 MiB/);
    await paste("broken.png", "image/png", { size: 1000, fill: 0x42 });
    await until(async () => /broken\.png is not an image Hearth can read/.test(await textOf(app.browser, "attach-error")), "the corrupt image sentence", 20_000);
  });

  it("refuses a PNG that claims 100000×100000 pixels and an unsupported format, decoding neither", async () => {
    await paste("bomb.png", "image/png", BOMB_B64);
    await until(async () => /bomb\.png is 100000×100000 pixels; images up to \d+ megapixels can be attached/.test(await textOf(app.browser, "attach-error")), "the pixel-limit sentence", 20_000);
    await paste("pixel.bmp", "image/bmp", BMP_B64);
    await until(async () => /pixel\.bmp is not an image Hearth can read \(PNG, JPEG, GIF or WebP\)/.test(await textOf(app.browser, "attach-error")), "the unsupported-format sentence", 20_000);
    assert.deepEqual(await texts(app.browser, '[data-testid="staged-thumbnail"]'), [], "nothing was staged");
  });

  it("sends a long (200 KB) message whole", async () => {
    const long = "word ".repeat(40_000).trim();
    await setComposer(app.browser, long);
    await click(app.browser, "send-button");
    await until(async () => (await attrs(app.browser, '[data-testid="message"][data-role="assistant"]', "data-status")).at(-1) === "done", "the reply", 120_000);
    const sent = await app.browser.execute(() => [...document.querySelectorAll('[data-testid="message"][data-role="user"] [data-testid="message-text"]')].at(-1).innerText.length);
    assert.equal(sent, long.length, "the whole message is in the conversation");
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
    await addProfile("Broken", "not a url", "m");
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

  it("says a profile's host cannot be reached when it is tested", async () => {
    // Port 9 (discard) on loopback: nothing listens there.
    await addProfile("Offline box", "http://127.0.0.1:9/v1", "m");
    const card = await until(async () => {
      for (const c of await app.browser.$$('[data-testid="profile-card"]')) if ((await c.getText()).includes("Offline box")) return c;
      return null;
    }, "the new profile", 20_000);
    await (await card.$('[data-testid="profile-test"]')).click();
    await until(async () => /Could not connect to http:\/\/127\.0\.0\.1:9\/v1\/chat\/completions: is the server running/.test(await (await card.$('[data-testid="profile-test-result"]')).getText()), "the unreachable-host sentence", 30_000);
    await screenshot(app, "profile-unreachable");
  });

  it("says a project folder was deleted when the user sends to it, and keeps the message", async () => {
    const gone = path.join(scratch, "gone");
    mkdirSync(gone);
    await click(app.browser, "add-project");
    await (await app.browser.$('[data-testid="project-path"]')).setValue(gone);
    await click(app.browser, "project-add-submit");
    await until(async () => (await texts(app.browser, '[data-testid="project-item"]')).includes("gone"), "the second project", 20_000);
    await click(app.browser, "new-conversation");
    rmSync(gone, { recursive: true });
    await (await app.browser.$('[data-testid="composer-input"]')).setValue("are you there?");
    await click(app.browser, "send-button");
    const said = await until(async () => (await texts(app.browser, '[role="alert"]')).find((t) => /does not exist \(was it moved or deleted\?\)/.test(t)), "the deleted-folder sentence", 30_000);
    assert.match(said, new RegExp(gone.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")));
    // Refused before it is stored: the text stays in the box, to send again once the folder is back.
    const inBox = await app.browser.execute(() => document.querySelector('[data-testid="composer-input"]').value);
    assert.equal(inBox, "are you there?");
    await screenshot(app, "project-folder-deleted");
  });
});
