import { describe, expect, it, vi } from "vitest";
import { fireEvent, render, screen } from "@testing-library/svelte";
import type { ModelProfile } from "../lib/bindings";

const clearProfileApiKey = vi.fn();
vi.mock("../lib/bindings", () => ({ commands: { clearProfileApiKey: (id: string) => clearProfileApiKey(id) } }));

const { default: ProfilesView } = await import("./ProfilesView.svelte");

const builtin: ModelProfile = { id: "b", name: "Built-in scripted model", protocol: "openAiChatCompletions", baseUrl: "builtin:scripted", model: "scripted", hasApiKey: true, imageInput: true, builtin: true };
const withKey: ModelProfile = { id: "w", name: "Work", protocol: "openAiChatCompletions", baseUrl: "https://api.example.com/v1", model: "m", hasApiKey: true, imageInput: false, builtin: false };
const withoutKey: ModelProfile = { ...withKey, id: "n", name: "Local", hasApiKey: false };

describe("ProfilesView", () => {
  it("offers Clear key only on profiles that have one, and reloads after clearing", async () => {
    clearProfileApiKey.mockResolvedValue({ status: "ok", data: { ...withKey, hasApiKey: false } });
    const onchanged = vi.fn();
    render(ProfilesView, { profiles: [builtin, withKey, withoutKey], defaultProfileId: "b", onchanged });
    const buttons = screen.getAllByTestId("profile-clear-key");
    expect(buttons).toHaveLength(1);
    expect(screen.getAllByTestId("profile-key-state").map((e) => e.textContent)).toEqual(["Accepts images · API key stored", "Text only · API key stored", "Text only"]);
    await fireEvent.click(buttons[0]);
    expect(clearProfileApiKey).toHaveBeenCalledWith("w");
    await vi.waitFor(() => expect(onchanged).toHaveBeenCalledOnce());
  });

  it("says why a key could not be cleared", async () => {
    clearProfileApiKey.mockResolvedValue({ status: "error", error: { message: "The desktop keyring did not answer within 30 s when Hearth tried to remove a secret." } });
    const onchanged = vi.fn();
    render(ProfilesView, { profiles: [withKey], defaultProfileId: null, onchanged });
    await fireEvent.click(screen.getByTestId("profile-clear-key"));
    expect((await screen.findByRole("alert")).textContent).toContain("did not answer within 30 s");
    expect(onchanged).not.toHaveBeenCalled();
  });
});
