// Work done once per frame. A hidden window gets no frames (WebKit stops them), so a timer stands in
// after a while: what was scheduled still happens, only not on screen.

/** How long a frame may fail to come before the timer runs the work anyway. */
export const FRAME_FALLBACK_MS = 100;

/** Runs `work` once, at the next frame or after [`FRAME_FALLBACK_MS`], whichever comes first.
 * Returns a function that cancels it. */
export function onNextFrame(work: () => void): () => void {
  let done = false;
  const run = () => {
    if (done) return;
    done = true;
    cancelAnimationFrame(frame);
    clearTimeout(timer);
    work();
  };
  const frame = requestAnimationFrame(run);
  const timer = setTimeout(run, FRAME_FALLBACK_MS);
  return () => {
    done = true;
    cancelAnimationFrame(frame);
    clearTimeout(timer);
  };
}
