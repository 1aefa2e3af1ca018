import { describe, expect, it, vi } from "vitest";
import { fireEvent, render, screen } from "@testing-library/svelte";
import { conversation, project } from "./testing/fixtures";

/** Answers of the commands the window calls on opening; any other command answers an error. */
const answers: Record<string, () => Promise<unknown>> = {};
const ok = (data: unknown) => Promise.resolve({ status: "ok", data });
vi.mock("./lib/bindings", () => ({
  commands: new Proxy(
    {},
    {
      get: (_, name: string) => () => (answers[name] ?? (() => ok(null)))(),
    },
  ),
}));

const { default: App } = await import("./App.svelte");

const builtin = { id: "b", name: "Built-in scripted model", protocol: "openAiChatCompletions", baseUrl: "builtin:scripted", model: "scripted", hasApiKey: true, imageInput: true, builtin: true };

describe("App", () => {
  it("keeps the view the user went to while the agents are still being looked for", async () => {
    let agentsFound!: (list: unknown[]) => void;
    answers.listProjects = () => ok([project()]);
    answers.listConversations = () => ok([conversation()]);
    answers.listProfiles = () => ok([builtin]);
    answers.appSettings = () => ok({ defaultProfileId: "b", runtimeBinaryOverride: null });
    answers.listAgents = () => new Promise((resolve) => (agentsFound = (list) => resolve({ status: "ok", data: list })));
    render(App);

    // The projects are known: the window moves to the conversations without waiting for the agents.
    await vi.waitFor(() => expect(screen.getByTestId("nav-profiles")).toBeTruthy());
    await vi.waitFor(() => expect(screen.queryByText("Welcome to Hearth")).toBeTruthy());
    await fireEvent.click(screen.getByTestId("nav-profiles"));
    expect(screen.getByTestId("profiles-view")).toBeTruthy();

    // The agents arrive; once the callbacks waiting on them have run, the view is still Models.
    agentsFound([]);
    await new Promise((r) => setTimeout(r, 0));
    expect(screen.getByTestId("profiles-view")).toBeTruthy();
  });

  it("stays on Runtime, the view it opens on, when the user chose it while the projects loaded", async () => {
    let projectsFound!: (list: unknown[]) => void;
    answers.listProjects = () => new Promise((resolve) => (projectsFound = (list) => resolve({ status: "ok", data: list })));
    answers.listConversations = () => ok([conversation()]);
    answers.listProfiles = () => ok([builtin]);
    answers.appSettings = () => ok({ defaultProfileId: "b", runtimeBinaryOverride: null });
    answers.listAgents = () => ok([]);
    render(App);

    await vi.waitFor(() => expect(screen.getByTestId("nav-runtime")).toBeTruthy());
    await fireEvent.click(screen.getByTestId("nav-runtime"));
    projectsFound([project()]);
    // Once the projects are known the sidebar lists them; the view is still the user's.
    await vi.waitFor(() => expect(screen.getAllByText(project().name).length).toBeGreaterThan(0));
    await new Promise((r) => setTimeout(r, 0));
    expect(screen.getByTestId("nav-runtime").classList.contains("active")).toBe(true);
    expect(screen.queryByText("Welcome to Hearth")).toBeNull();
  });
});
