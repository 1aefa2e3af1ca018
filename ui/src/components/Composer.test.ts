import { describe, expect, it, vi } from "vitest";
import { fireEvent, render, screen } from "@testing-library/svelte";
import Composer from "./Composer.svelte";

function setup(busy = false) {
  const onsend = vi.fn(async () => true);
  const oncancel = vi.fn();
  const onattach = vi.fn(async (f: { name: string }) => ({ id: `att-${f.name}`, name: f.name, thumbnailDataUrl: "data:image/png;base64,AA==" }));
  render(Composer, { busy, onsend, oncancel, onattach });
  return { onsend, oncancel, onattach, input: screen.getByTestId("composer-input") as HTMLTextAreaElement };
}

describe("Composer", () => {
  it("Enter sends, Shift+Enter does not", async () => {
    const { onsend, input } = setup();
    await fireEvent.input(input, { target: { value: "hello" } });
    await fireEvent.keyDown(input, { key: "Enter", shiftKey: true });
    expect(onsend).not.toHaveBeenCalled();
    await fireEvent.keyDown(input, { key: "Enter" });
    expect(onsend).toHaveBeenCalledWith("hello", []);
    await vi.waitFor(() => expect(input.value).toBe(""));
  });

  it("a message the backend refuses stays in the box", async () => {
    const onsend = vi.fn(async () => false);
    render(Composer, { busy: false, onsend, oncancel: vi.fn(), onattach: vi.fn() });
    const input = screen.getByTestId("composer-input") as HTMLTextAreaElement;
    await fireEvent.input(input, { target: { value: "x".repeat(100) } });
    await fireEvent.keyDown(input, { key: "Enter" });
    expect(onsend).toHaveBeenCalledOnce();
    expect(input.value).toBe("x".repeat(100));
  });

  it("an empty message is not sent", async () => {
    const { onsend, input } = setup();
    await fireEvent.input(input, { target: { value: "   " } });
    await fireEvent.keyDown(input, { key: "Enter" });
    expect(onsend).not.toHaveBeenCalled();
  });

  it("Esc cancels a running turn and Enter does not send while busy", async () => {
    const { onsend, oncancel, input } = setup(true);
    await fireEvent.input(input, { target: { value: "more" } });
    await fireEvent.keyDown(input, { key: "Enter" });
    expect(onsend).not.toHaveBeenCalled();
    await fireEvent.keyDown(input, { key: "Escape" });
    expect(oncancel).toHaveBeenCalledOnce();
  });

  it("a pasted image is staged with a thumbnail and sent with the message", async () => {
    const { onsend, onattach, input } = setup();
    const file = new File([new Uint8Array([137, 80, 78, 71])], "shot.png", { type: "image/png" });
    await fireEvent.paste(input, { clipboardData: { files: [file] } });
    expect(await screen.findByTestId("staged-thumbnail")).toBeTruthy();
    expect(onattach).toHaveBeenCalledWith({ name: "shot.png", dataBase64: "iVBORw==" });
    await fireEvent.input(input, { target: { value: "see this" } });
    await fireEvent.keyDown(input, { key: "Enter" });
    expect(onsend).toHaveBeenCalledWith("see this", ["att-shot.png"]);
    await vi.waitFor(() => expect(screen.queryByTestId("staged-thumbnail")).toBeNull());
  });

  it("a refused image shows the backend's sentence", async () => {
    const onattach = vi.fn(async () => { throw new Error("notes.png is not an image Hearth can read."); });
    render(Composer, { busy: false, onsend: vi.fn(async () => true), oncancel: vi.fn(), onattach });
    const file = new File(["x"], "notes.png", { type: "image/png" });
    await fireEvent.paste(screen.getByTestId("composer-input"), { clipboardData: { files: [file] } });
    expect((await screen.findByTestId("attach-error")).textContent).toContain("not an image Hearth can read");
  });
});
