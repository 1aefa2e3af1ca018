import { describe, expect, it } from "vitest";
import { cachedSegments, MAX_CACHED_SEGMENTS, MAX_LIVE_SEGMENT_CHARS, MAX_MARKDOWN_CHARS, PENDING_PREVIEW_CHARS, RENDER_BUDGET_MS, renderMarkdown, ReplySegments, SEGMENT_CHARS, segmentEnds } from "./markdown";

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
});

describe("ReplySegments", () => {
  const para = (i: number) => `Paragraph ${i}: ${"words ".repeat(120)}\n\n`;
  const fenced = "```rust\n" + "fn a() {}\n\n".repeat(600) + "```\n\n";

  it("cuts at blank lines outside code fences once a segment is long enough", () => {
    const text = para(1).repeat(12) + fenced + "tail";
    let start = 0;
    for (const end of segmentEnds(text, 0)) {
      const segment = text.slice(start, end);
      expect(segment.length).toBeGreaterThanOrEqual(SEGMENT_CHARS);
      expect(segment.endsWith("\n\n")).toBe(true);
      // Never inside the fence: a segment holds all of it or none of it.
      expect((segment.match(/```/g) ?? []).length % 2).toBe(0);
      start = end;
    }
    expect(segmentEnds("short\n\ntext", 0)).toEqual([]);
  });

  it("streamed or opened finished, a reply is the same segments, each rendered once", () => {
    const reply = "# Title\n\n" + para(1).repeat(10) + "```rust\nfn main() {}\n```\n\n" + para(2).repeat(10) + "A last para";
    const live = new ReplySegments();
    let shown: string[] = [];
    let previous: string[] = [];
    for (let i = 1; i <= reply.length; i += 97) {
      shown = live.render(reply.slice(0, i), false).parts;
      // Finished segments never change while it streams.
      expect(shown.slice(0, previous.length - 1)).toEqual(previous.slice(0, previous.length - 1));
      previous = shown;
    }
    shown = live.render(reply, true).parts;
    expect(shown.length).toBeGreaterThan(2);
    expect(new ReplySegments().render(reply, true)).toEqual({ parts: shown, pending: false });
    const html = shown.join("");
    for (const part of ["<h1>Title</h1>", '<span class="hljs-keyword">fn</span>', "<p>A last para</p>"]) expect(html).toContain(part);
  });

  it("starts again when the text is replaced, sanitises every segment, and remembers boundedly", () => {
    const segments = new ReplySegments();
    segments.render("first\n\nsecond", false);
    const shown = segments.render("other <img src=x onerror=alert(1)>\n\nend", true).parts;
    expect(shown.join("")).toContain("other");
    expect(shown.join("")).not.toContain("onerror");
    for (let i = 0; i < MAX_CACHED_SEGMENTS + 10; i++) new ReplySegments().render(`reply ${i}`, true);
    expect(cachedSegments()).toBe(MAX_CACHED_SEGMENTS);
    const streaming = cachedSegments();
    new ReplySegments().render("not finished", false);
    expect(cachedSegments()).toBe(streaming);
  });

  it("renders what its time allows and shows the rest as plain text until later renders", () => {
    // A clock that moves past the budget with every reading: one new segment per render.
    let t = 0;
    const slow = new ReplySegments(() => (t += RENDER_BUDGET_MS + 1));
    const reply = Array.from({ length: 40 }, (_, i) => para(100 + i)).join("") + "The <b>end</b>";
    let shown = slow.render(reply, true);
    expect(shown.pending).toBe(true);
    // What follows is shown plain (a bounded preview: laying out all of it every frame costs too).
    const preview = shown.parts.at(-1)!;
    expect(preview).toMatch(/^<div class="pending">Paragraph/);
    expect(preview.length).toBeLessThan(PENDING_PREVIEW_CHARS + 64);
    let renders = 1;
    while (shown.pending && renders < 100) {
      shown = slow.render(reply, true);
      renders++;
    }
    expect(renders).toBeGreaterThan(1);
    expect(shown).toEqual(new ReplySegments(() => 0).render(reply, true));
    expect(shown.parts.at(-1)).toContain("The <b>end</b>");
  });

  it("shows a long open code block as plain text while it streams", () => {
    const open = "```rust\n" + "let x = 1;\n".repeat(MAX_LIVE_SEGMENT_CHARS / 10);
    const live = new ReplySegments().render(open, false);
    expect(live.parts.at(-1)).toMatch(/^<div class="pending">/);
    expect(new ReplySegments().render(open + "```\n", true).parts.at(-1)).toContain("hljs");
  });
});
