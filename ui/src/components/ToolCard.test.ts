import { expect, it } from "vitest";
import { fireEvent, render, screen } from "@testing-library/svelte";
import ToolCard from "./ToolCard.svelte";

it("shows the tool on one line and its input and output when opened", async () => {
  render(ToolCard, { tool: "read", status: "completed", input: { filePath: "marker.txt" }, output: "1: PROJECT_7" });
  const card = screen.getByTestId("tool-card");
  expect(card.textContent).toContain("read");
  expect(card.textContent).toContain("marker.txt");
  expect(screen.queryByTestId("tool-output")).toBeNull();
  await fireEvent.click(card.querySelector("button")!);
  expect(screen.getByTestId("tool-output").textContent).toBe("1: PROJECT_7");
  expect(screen.getByTestId("tool-input").textContent).toContain('"filePath": "marker.txt"');
});

it("long output is cut until asked for", async () => {
  render(ToolCard, { tool: "bash", status: "completed", input: { command: "ls" }, output: "x".repeat(10_000) });
  await fireEvent.click(screen.getByTestId("tool-card").querySelector("button")!);
  expect(screen.getByTestId("tool-output").textContent!.length).toBe(4000);
  await fireEvent.click(screen.getByText(/Show all/));
  expect(screen.getByTestId("tool-output").textContent!.length).toBe(10_000);
});
