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

/** Finished replies whose HTML is kept: a virtualized list mounts a reply again each time it scrolls
 * back into view, and parsing plus highlighting is most of that cost. */
export const MAX_CACHED_REPLIES = 500;
/** Longer replies are rendered each time rather than held in memory. */
export const MAX_CACHED_CHARS = 64 * 1024;
const cache = new Map<string, string>();

/** `renderMarkdown` for a reply that no longer changes, remembered (least recently used goes first). */
export function renderFinishedMarkdown(source: string): string {
  const hit = cache.get(source);
  if (hit !== undefined) {
    cache.delete(source);
    cache.set(source, hit);
    return hit;
  }
  const html = renderMarkdown(source);
  if (source.length <= MAX_CACHED_CHARS) {
    cache.set(source, html);
    if (cache.size > MAX_CACHED_REPLIES) cache.delete(cache.keys().next().value!);
  }
  return html;
}

/** How many replies are remembered (for tests). */
export const cachedReplies = () => cache.size;
