import { describe, expect, it } from "vitest";
import { cachedReplies, MAX_CACHED_CHARS, MAX_CACHED_REPLIES, MAX_MARKDOWN_CHARS, renderFinishedMarkdown, renderMarkdown } from "./markdown";

describe("renderMarkdown", () => {
  it("renders GitHub-flavoured Markdown with highlighted code", () => {
    const html = renderMarkdown("# Title\n\n- a\n- b\n\n```rust\nfn main() {}\n```\n");
    expect(html).toContain("<h1>Title</h1>");
    expect(html).toContain("<li>a</li>");
    expect(html).toContain('class="hljs language-rust"');
    expect(html).toContain('<span class="hljs-keyword">fn</span>');
  });

  it("removes scripts and event handlers from model output", () => {
    const html = renderMarkdown('hi <script>alert(1)</script><img src=x onerror="alert(2)"> [x](javascript:alert(3))');
    expect(html).not.toContain("<script");
    expect(html).not.toContain("onerror");
    expect(html).not.toContain("javascript:");
  });

  it("escapes code in unknown languages", () => {
    expect(renderMarkdown("```\n<b>x</b>\n```")).toContain("&lt;b&gt;x&lt;/b&gt;");
  });

  it("shows huge replies as plain text", () => {
    const html = renderMarkdown("*".repeat(MAX_MARKDOWN_CHARS + 1));
    expect(html.startsWith('<pre class="plain">')).toBe(true);
  });

  it("remembers finished replies, boundedly, and gives the same HTML", () => {
    const src = "**done** `x`";
    expect(renderFinishedMarkdown(src)).toBe(renderMarkdown(src));
    expect(renderFinishedMarkdown(src)).toBe(renderMarkdown(src));
    for (let i = 0; i < MAX_CACHED_REPLIES + 10; i++) renderFinishedMarkdown(`reply ${i}`);
    expect(cachedReplies()).toBe(MAX_CACHED_REPLIES);
    const before = cachedReplies();
    renderFinishedMarkdown("y".repeat(MAX_CACHED_CHARS + 1));
    expect(cachedReplies()).toBe(before);
  });
});
