// Markdown for assistant replies: GitHub-flavoured, code highlighted, and sanitised — a reply is
// model output, so it is untrusted HTML until DOMPurify says otherwise.
import { Marked } from "marked";
import DOMPurify from "dompurify";
import hljs from "highlight.js/lib/common";

/** Replies longer than this are shown as plain text: highlighting megabytes would freeze the UI. */
export const MAX_MARKDOWN_CHARS = 400_000;

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}

const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    code({ text, lang }) {
      const language = lang && hljs.getLanguage(lang) ? lang : undefined;
      const html = language ? hljs.highlight(text, { language }).value : escapeHtml(text);
      const label = language ? `<span class="code-lang">${escapeHtml(language)}</span>` : "";
      return `<pre class="code">${label}<code class="hljs${language ? ` language-${language}` : ""}">${html}</code></pre>`;
    },
  },
});

/** Safe HTML for a reply. Links open nothing inside the app window (the shell opens none). */
export function renderMarkdown(source: string): string {
  if (source.length > MAX_MARKDOWN_CHARS) {
    return `<pre class="plain">${escapeHtml(source)}</pre>`;
  }
  const html = marked.parse(source, { async: false }) as string;
  return DOMPurify.sanitize(html, { USE_PROFILES: { html: true }, FORBID_TAGS: ["style", "form", "input"], FORBID_ATTR: ["style"] });
}

/** A reply is cut into segments of about this many characters, each rendered on its own, at
 * block boundaries (a blank line outside a code fence). */
export const SEGMENT_CHARS = 4096;
/** Rendered segments kept (least recently used goes first): a virtualized list mounts a reply again
 * each time it scrolls back into view, and parsing plus highlighting is most of that cost. */
export const MAX_CACHED_SEGMENTS = 1000;
const cache = new Map<string, string>();

function renderSegment(source: string, keep: boolean): string {
  const hit = cache.get(source);
  if (hit !== undefined) {
    cache.delete(source);
    cache.set(source, hit);
    return hit;
  }
  const html = renderMarkdown(source);
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

/** Time one render may spend on new segments beyond the first: the rest waits for the next frame,
 * so a reply arriving faster than it can be rendered (or opened whole) never freezes the window. */
export const RENDER_BUDGET_MS = 8;
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
 * Each render spends about [`RENDER_BUDGET_MS`] on new segments and shows the rest as plain text.
 */
export class ReplySegments {
  private done = "";
  private segments: string[] = [];

  constructor(private readonly now: () => number = () => performance.now()) {}

  render(text: string, finished: boolean): ShownReply {
    if (text.length > MAX_MARKDOWN_CHARS) return { parts: [renderMarkdown(text)], pending: false };
    if (!text.startsWith(this.done)) {
      this.done = "";
      this.segments = [];
    }
    const deadline = this.now() + RENDER_BUDGET_MS;
    let start = this.done.length;
    let rendered = 0;
    let pending = false;
    // Parts handed out earlier stay as they were: new segments go into a new array.
    const added: string[] = [];
    for (const end of segmentEnds(text, start)) {
      const source = text.slice(start, end);
      const remembered = cache.has(source);
      if (rendered > 0 && !remembered && this.now() > deadline) {
        pending = true;
        break;
      }
      if (!remembered) rendered++;
      added.push(renderSegment(source, true));
      start = end;
    }
    if (added.length > 0) this.segments = [...this.segments, ...added];
    this.done = text.slice(0, start);
    const rest = text.slice(start);
    if (pending) return { parts: [...this.segments, plain(rest, PENDING_PREVIEW_CHARS)], pending };
    if (!rest && this.segments.length > 0) return { parts: this.segments, pending };
    if (!finished && rest.length > MAX_LIVE_SEGMENT_CHARS) return { parts: [...this.segments, plain(rest)], pending };
    return { parts: [...this.segments, renderSegment(rest, finished)], pending };
  }
}
