// The Runtime view in the real window, against the real runtime binary.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { click, launchApp, realRuntime, screenshot, stopApp, textOf, texts, until } from "./harness.mjs";

describe("Runtime view (real window, real runtime binary)", () => {
  let app;
  const runtime = realRuntime(); // throws — fails the suite — when the binary is missing

  before(async () => {
    app = await launchApp();
  });
  after(async () => {
    await stopApp(app);
  });

  it("opens on the app frame with the Runtime view", async () => {
    assert.equal(await app.browser.getTitle(), "Hearth");
    assert.match(await textOf(app.browser, "sidebar"), /Hearth[\s\S]*Runtime/);
  });

  it("shows the version the real binary prints, which is the pinned one", async () => {
    assert.equal(runtime.printed, runtime.pinned, "the installed binary is not the pinned version");
    const shown = await textOf(app.browser, "runtime-binary-version");
    assert.equal(shown, runtime.printed);
    assert.equal(await textOf(app.browser, "runtime-binary-path"), runtime.bin);
    assert.match(await textOf(app.browser, "runtime-summary"), new RegExp(`Runtime ready — OpenCode ${runtime.pinned}`));
    assert.match(await textOf(app.browser, "ripgrep-path"), /\/rg$/);
    assert.equal(await textOf(app.browser, "data-dir"), app.dataDir);
    await screenshot(app, "runtime-view");
  });

  it("says secrets are kept in a private file when no desktop keyring answers", async () => {
    // The harness gives the app a session bus address with nothing behind it.
    const file = path.join(app.dataDir, "secrets.json");
    assert.equal(await textOf(app.browser, "secrets-location"), `Secrets are kept in a private file ${file}, because no desktop keyring answered.`);
  });

  it("clears a profile's key from the Models view", async () => {
    const KEY = "sk-e2e-clear-me-3f9a";
    await click(app.browser, "nav-profiles");
    await click(app.browser, "add-profile");
    const form = await app.browser.$('[data-testid="profile-form"]');
    const [name, url, model, key] = await form.$$("input");
    await name.setValue("Keyed");
    await url.setValue("https://api.example.com/v1");
    await model.setValue("m");
    await key.setValue(KEY);
    await (await form.$('button[type="submit"]')).click();
    const keyState = () => texts(app.browser, '[data-testid="profile-key-state"]');
    await until(async () => (await keyState()).includes("Text only · API key stored"), "the new profile with its key");
    await screenshot(app, "profile-with-key");
    await click(app.browser, "profile-clear-key");
    await until(async () => !(await keyState()).some((t) => t.includes("API key stored")), "the profile to show no key");
    assert.deepEqual(await texts(app.browser, '[data-testid="profile-clear-key"]'), [], "no key left to clear");
  });
});
