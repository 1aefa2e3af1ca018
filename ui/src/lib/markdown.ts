// Markdown for assistant replies: GitHub-flavoured (tables, strikethrough, bare links), code
// highlighted, and sanitised — a reply is model output, so it is untrusted HTML until DOMPurify says
// otherwise. markdown-it, not marked: in WebKit (the window's engine) it parses a reply 10-25 times
// faster (1 KB in 0.06-0.09 ms against 0.8-1.1 ms), which decides whether a fast reply keeps the
// frame rate.
import MarkdownIt from "markdown-it";
import DOMPurify from "dompurify";
import hljs from "highlight.js/lib/common";

/** Replies longer than this are shown as plain text: highlighting megabytes would freeze the UI. */
export const MAX_MARKDOWN_CHARS = 400_000;

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}

/** Highlighted code blocks kept, by language and text: a reply that streams renders its last
 * segment again with every delta, and each of its finished blocks is then highlighted once. */
export const MAX_CACHED_HIGHLIGHTS = 256;
const highlights = new Map<string, string>();

function highlight(text: string, language: string): string {
  const key = `${language}\0${text}`;
  const hit = highlights.get(key);
  if (hit !== undefined) return hit;
  const html = hljs.highlight(text, { language }).value;
  highlights.set(key, html);
  if (highlights.size > MAX_CACHED_HIGHLIGHTS) highlights.delete(highlights.keys().next().value!);
  return html;
}

/** What a render knows beside the tokens: the source's lines, and whether it is still being
 * written (its last code block may still be open: that block shows plain until it closes, rather
 * than being highlighted anew with every delta). */
interface RenderEnv {
  lines: string[];
  live: boolean;
}

/** Whether the fenced block on lines `[start, end)` ends with its closing fence. */
function closedFence(env: RenderEnv, start: number, end: number, markup: string): boolean {
  const last = (env.lines[end - 1] ?? "").trim();
  return end - start >= 2 && last.length >= markup.length && [...last].every((c) => c === markup[0]);
}

const markdown = new MarkdownIt({ html: true, linkify: true, breaks: false });
markdown.renderer.rules.fence = (tokens, idx, _options, env: RenderEnv) => {
  const token = tokens[idx];
  const lang = token.info.trim().split(/\s+/)[0];
  const language = lang && hljs.getLanguage(lang) ? lang : undefined;
  const open = env.live && token.map !== null && !closedFence(env, token.map[0], token.map[1], token.markup);
  const html = language !== undefined && !open ? highlight(token.content, language) : escapeHtml(token.content);
  const label = language ? `<span class="code-lang">${escapeHtml(language)}</span>` : "";
  return `<pre class="code">${label}<code class="hljs${language ? ` language-${language}` : ""}">${html}</code></pre>\n`;
};

/** Safe HTML for a reply (`live`: a part still being written, see `RenderEnv`). Links open nothing
 * inside the app window (the shell opens none). */
export function renderMarkdown(source: string, live = false): string {
  if (source.length > MAX_MARKDOWN_CHARS) {
    return `<pre class="plain">${escapeHtml(source)}</pre>`;
  }
  const env: RenderEnv = { lines: source.split("\n"), live };
  const html = markdown.render(source, env);
  return DOMPurify.sanitize(html, { USE_PROFILES: { html: true }, FORBID_TAGS: ["style", "form", "input"], FORBID_ATTR: ["style"] });
}

/** A reply is cut into segments of about this many characters, each rendered on its own, at
 * block boundaries (a blank line outside a code fence). */
export const SEGMENT_CHARS = 1024;
/** Rendered segments kept (least recently used goes first): a virtualized list mounts a reply again
 * each time it scrolls back into view, and parsing plus highlighting is most of that cost. */
export const MAX_CACHED_SEGMENTS = 1000;
const cache = new Map<string, string>();

/** A segment's HTML; `keep` (a finished segment) remembers it, else it is the live end of a reply. */
function renderSegment(source: string, keep: boolean): string {
  const hit = cache.get(source);
  if (hit !== undefined) {
    cache.delete(source);
    cache.set(source, hit);
    return hit;
  }
  const html = renderMarkdown(source, !keep);
  if (keep) {
    cache.set(source, html);
    if (cache.size > MAX_CACHED_SEGMENTS) cache.delete(cache.keys().next().value!);
  }
  return html;
}

/** How many segments are remembered (for tests). */
export const cachedSegments = () => cache.size;

/** A line opening or closing a fenced code block (``` or ~~~, up to three spaces in). */
const FENCE = /^ {0,3}(`{3,}|~{3,})/;

/**
 * The ends of the segments of `text` from `from` (a segment's start, so outside any code fence):
 * a segment ends just after the first blank line outside a fence once it holds [`SEGMENT_CHARS`].
 * A line still being written (no newline yet) never ends one. The same text always cuts the same
 * way, so a reply streamed in and the same reply opened later are the same segments.
 */
export function segmentEnds(text: string, from: number): number[] {
  const ends: number[] = [];
  let start = from;
  let fence: string | null = null;
  let lineStart = from;
  while (lineStart < text.length) {
    const nl = text.indexOf("\n", lineStart);
    if (nl === -1) break;
    const line = text.slice(lineStart, nl);
    const marker = FENCE.exec(line)?.[1];
    if (fence === null && marker) fence = marker;
    else if (fence !== null && marker && marker[0] === fence[0] && marker.length >= fence.length && line.trim() === marker) fence = null;
    if (fence === null && line.trim() === "" && nl + 1 - start >= SEGMENT_CHARS) {
      ends.push(nl + 1);
      start = nl + 1;
    }
    lineStart = nl + 1;
  }
  return ends;
}

/** Time the replies in view may spend together on new Markdown in one frame. A list that brings
 * many replies into view at once (a long jump while scrolling) renders what fits, shows the rest as
 * plain text, and renders it over the next frames: parsing, highlighting and sanitising ten replies
 * in one frame took 10-25 ms on first sight, most of a frame on a machine without a GPU. */
export const FRAME_RENDER_BUDGET_MS = 6;
/** How long one budget lasts: about a frame at 60 Hz. */
export const BUDGET_WINDOW_MS = 16;

/**
 * Time spent rendering new Markdown, shared by every reply on screen and renewed each frame. The
 * first render of a frame always may start, so every reply moves on however slow one render is.
 */
export class RenderBudget {
  private windowStart = -Infinity;
  private spent = 0;
  private used = false;

  constructor(
    private readonly now: () => number = () => performance.now(),
    private readonly budgetMs = FRAME_RENDER_BUDGET_MS,
  ) {}

  private roll(): number {
    const t = this.now();
    if (t - this.windowStart >= BUDGET_WINDOW_MS) {
      this.windowStart = t;
      this.spent = 0;
      this.used = false;
    }
    return t;
  }

  /** Whether a render may start now. */
  allows(): boolean {
    this.roll();
    return !this.used || this.spent < this.budgetMs;
  }

  /** Run `work`, counting its time against this frame's budget. */
  spend<T>(work: () => T): T {
    const started = this.roll();
    try {
      return work();
    } finally {
      this.used = true;
      this.spent += this.now() - started;
    }
  }
}

/** The budget every reply in the window shares. */
export const frameBudget = new RenderBudget();

/** While a reply streams, a last segment longer than this (a long code block still open) is shown as
 * plain text until it ends: rendering it again every frame would take longer than the frame. */
export const MAX_LIVE_SEGMENT_CHARS = 16_384;

/** Of the text not rendered yet, this much is shown as it is (escaped) until its turn comes: laying
 * out more plain text every frame would cost what rendering saves. */
export const PENDING_PREVIEW_CHARS = 2048;

function plain(text: string, limit = Infinity): string {
  const shown = text.length > limit ? `${text.slice(0, limit)}…` : text;
  return `<div class="pending">${escapeHtml(shown)}</div>`;
}

/** What a reply shows now; `pending` when some of it is still plain text and wants another render. */
export interface ShownReply {
  parts: string[];
  pending: boolean;
}

/**
 * A reply's HTML as segments. While it streams, each finished segment is rendered once and only
 * the last one again with each delta (rendering the whole reply on every delta would parse and
 * highlight a 200 KB reply some two hundred times over); finished, the segments are the same, so
 * the window keeps what it shows, and they are remembered for the next time the reply is shown.
 * New segments are rendered as the shared [`RenderBudget`] allows; the rest shows as plain text.
 */
export class ReplySegments {
  private done = "";
  private segments: string[] = [];

  constructor(private readonly budget: RenderBudget = frameBudget) {}

  /** A segment's HTML: remembered, or rendered within the budget; `null` when it must wait. */
  private segment(source: string, keep: boolean, always = false): string | null {
    if (!always && !cache.has(source) && !this.budget.allows()) return null;
    return this.budget.spend(() => renderSegment(source, keep));
  }

  render(text: string, finished: boolean): ShownReply {
    if (text.length > MAX_MARKDOWN_CHARS) return { parts: [renderMarkdown(text)], pending: false };
    if (!text.startsWith(this.done)) {
      this.done = "";
      this.segments = [];
    }
    let start = this.done.length;
    let pending = false;
    // Parts handed out earlier stay as they were: new segments go into a new array.
    const added: string[] = [];
    for (const end of segmentEnds(text, start)) {
      const html = this.segment(text.slice(start, end), true);
      if (html === null) {
        pending = true;
        break;
      }
      added.push(html);
      start = end;
    }
    if (added.length > 0) this.segments = [...this.segments, ...added];
    this.done = text.slice(0, start);
    const rest = text.slice(start);
    if (pending) return { parts: [...this.segments, plain(rest, PENDING_PREVIEW_CHARS)], pending };
    if (!rest && this.segments.length > 0) return { parts: this.segments, pending };
    if (!finished && rest.length > MAX_LIVE_SEGMENT_CHARS) return { parts: [...this.segments, plain(rest)], pending };
    // The segment a streaming reply is writing is what the user watches: always rendered.
    const last = this.segment(rest, finished, !finished);
    if (last === null) return { parts: [...this.segments, plain(rest, PENDING_PREVIEW_CHARS)], pending: true };
    return { parts: [...this.segments, last], pending };
  }
}
