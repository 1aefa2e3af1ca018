import { describe, expect, it } from "vitest";
import { render, screen, fireEvent, waitFor } from "@testing-library/svelte";
import SkillsPanel from "./SkillsPanel.svelte";
import type { SkillView } from "../lib/bindings";

const good: SkillView = { name: "good-skill", description: "Use for the good task.", path: "/d/skills/good-skill", problem: null };
const bad: SkillView = {
  name: "bad-skill",
  description: "",
  path: "/d/skills/bad-skill",
  problem: "The skill `bad-skill` has no description; the agent uses it to decide when to load the skill.",
};

describe("SkillsPanel", () => {
  it("shows a bad package with its sentence beside the good ones", async () => {
    render(SkillsPanel, { list: async () => [bad, good], add: async () => good, choose: async () => null });
    expect((await screen.findByTestId("skill-problem")).textContent).toBe(bad.problem);
    const cards = screen.getAllByTestId("skill-card").map((c) => c.textContent?.trim());
    expect(cards[0]).toContain("bad-skill");
    expect(cards[1]).toBe("good-skill — Use for the good task.");
  });

  it("shows why an add was refused, and replaces an existing skill only when asked", async () => {
    const calls: [string, boolean][] = [];
    const add = async (folder: string, replace: boolean) => {
      calls.push([folder, replace]);
      if (!replace) throw new Error("A skill named `good-skill` is already added; replace it to use this folder's version.");
      return good;
    };
    render(SkillsPanel, { list: async () => [good], add, choose: async () => null });
    await screen.findByText("good-skill");
    await fireEvent.input(screen.getByTestId("skill-folder"), { target: { value: "/src/good-skill/" } });
    await fireEvent.submit(screen.getByTestId("skill-folder").closest("form")!);
    expect((await screen.findByTestId("skill-error")).textContent).toContain("is already added; replace it");
    await fireEvent.click(screen.getByTestId("skill-replace"));
    await waitFor(() => expect(calls).toEqual([["/src/good-skill/", false], ["/src/good-skill/", true]]));
    await waitFor(() => expect(screen.queryByTestId("skill-error")).toBeNull());
  });

  it("offers no replace when the refusal is about the package itself", async () => {
    const add = async () => {
      throw new Error("The symbolic link passwd in the skill folder `leaky-skill` leads outside the package.");
    };
    render(SkillsPanel, { list: async () => [good], add, choose: async () => "/src/leaky-skill" });
    await screen.findByText("good-skill");
    await fireEvent.click(screen.getByTestId("skill-choose"));
    expect((await screen.findByTestId("skill-error")).textContent?.trim()).toBe("The symbolic link passwd in the skill folder `leaky-skill` leads outside the package.");
    expect(screen.queryByTestId("skill-replace")).toBeNull();
  });
});
