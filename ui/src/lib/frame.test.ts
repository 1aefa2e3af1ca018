import { afterEach, describe, expect, it, vi } from "vitest";
import { FRAME_FALLBACK_MS, onNextFrame } from "./frame";

describe("onNextFrame", () => {
  afterEach(() => {
    vi.useRealTimers();
    vi.unstubAllGlobals();
  });

  it("runs once at the next frame, not again when the fallback time passes", async () => {
    const work = vi.fn();
    onNextFrame(work);
    await new Promise(requestAnimationFrame);
    expect(work).toHaveBeenCalledTimes(1);
    await new Promise((r) => setTimeout(r, FRAME_FALLBACK_MS + 20));
    expect(work).toHaveBeenCalledTimes(1);
  });

  it("runs after the fallback when no frame comes (a hidden window), and not at all when cancelled", () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    vi.stubGlobal("requestAnimationFrame", () => 1);
    vi.stubGlobal("cancelAnimationFrame", () => {});
    const hidden = vi.fn();
    onNextFrame(hidden);
    vi.advanceTimersByTime(FRAME_FALLBACK_MS - 1);
    expect(hidden).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(hidden).toHaveBeenCalledTimes(1);

    const cancelled = vi.fn();
    onNextFrame(cancelled)();
    vi.advanceTimersByTime(FRAME_FALLBACK_MS * 2);
    expect(cancelled).not.toHaveBeenCalled();
  });
});
