import { describe, expect, it } from "vitest";
import { cachedSegments, MAX_CACHED_SEGMENTS, MAX_LIVE_SEGMENT_CHARS, MAX_MARKDOWN_CHARS, PENDING_PREVIEW_CHARS, RenderBudget, renderMarkdown, ReplySegments, SEGMENT_CHARS, segmentEnds } from "./markdown";

describe("renderMarkdown", () => {
  it("renders GitHub-flavoured Markdown with highlighted code", () => {
    const html = renderMarkdown("# Title\n\n- a\n- b\n\n```rust\nfn main() {}\n```\n");
    expect(html).toContain("<h1>Title</h1>");
    expect(html).toContain("<li>a</li>");
    expect(html).toContain('class="hljs language-rust"');
    expect(html).toContain('<span class="hljs-keyword">fn</span>');
  });

  it("removes scripts, event handlers and script links from model output", () => {
    const html = renderMarkdown('hi <script>alert(1)</script><img src=x onerror="alert(2)"> [x](javascript:alert(3)) <a href="javascript:alert(4)">y</a>');
    const page = document.createElement("template");
    page.innerHTML = html;
    const elements = [...page.content.querySelectorAll("*")];
    expect(elements.map((e) => e.tagName.toLowerCase())).not.toContain("script");
    const attributes = elements.flatMap((e) => [...e.attributes]);
    expect(attributes.filter((a) => a.name.startsWith("on"))).toEqual([]);
    expect(attributes.filter((a) => /^\s*javascript:/i.test(a.value))).toEqual([]);
    // What was refused as a link still reads as the text the model wrote.
    expect(page.content.textContent).toContain("[x](javascript:alert(3))");
  });

  it("renders tables, strikethrough and bare links as GitHub does", () => {
    const html = renderMarkdown("| a | b |\n|---|---|\n| 1 | 2 |\n\n~~gone~~ see https://example.com/x");
    expect(html).toContain("<table>");
    expect(html).toContain("<td>2</td>");
    expect(html).toContain("<s>gone</s>");
    expect(html).toContain('<a href="https://example.com/x">https://example.com/x</a>');
  });

  it("while a reply is written, highlights its closed code blocks and shows the open one plain", () => {
    const closed = "```rust\nfn closed() {}\n```\n\n";
    const live = renderMarkdown(closed + "```rust\nfn open() {", true);
    expect(live).toContain('<span class="hljs-title function_">closed</span>');
    expect(live).toContain("fn open() {</code>");
    // Finished, an unclosed block is all there is of it: highlighted.
    expect(renderMarkdown("```rust\nfn open() {", false)).toContain('<span class="hljs-keyword">fn</span>');
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
  /** A budget whose clock never moves: nothing waits for a later frame. */
  const unlimited = () => new ReplySegments(new RenderBudget(() => 0));

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
    const live = unlimited();
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
    expect(unlimited().render(reply, true)).toEqual({ parts: shown, pending: false });
    const html = shown.join("");
    for (const part of ["<h1>Title</h1>", '<span class="hljs-keyword">fn</span>', "<p>A last para</p>"]) expect(html).toContain(part);
  });

  it("starts again when the text is replaced, sanitises every segment, and remembers boundedly", () => {
    const segments = unlimited();
    segments.render("first\n\nsecond", false);
    const shown = segments.render("other <img src=x onerror=alert(1)>\n\nend", true).parts;
    expect(shown.join("")).toContain("other");
    expect(shown.join("")).not.toContain("onerror");
    for (let i = 0; i < MAX_CACHED_SEGMENTS + 10; i++) unlimited().render(`reply ${i}`, true);
    expect(cachedSegments()).toBe(MAX_CACHED_SEGMENTS);
    const streaming = cachedSegments();
    unlimited().render("not finished", false);
    expect(cachedSegments()).toBe(streaming);
  });

  /** A budget of 1 ms on a clock that moves 1 ms with every reading: one new segment per frame.
   * `frame()` moves the clock past the budget's window, as the next frame would. */
  const slowFrames = () => {
    let t = 0;
    const budget = new RenderBudget(() => ++t, 1);
    return { budget, frame: () => (t += 100) };
  };

  it("renders what its time allows and shows the rest as plain text until later renders", () => {
    const { budget, frame } = slowFrames();
    const slow = new ReplySegments(budget);
    const reply = Array.from({ length: 40 }, (_, i) => para(100 + i)).join("") + "The <b>end</b>";
    let shown = slow.render(reply, true);
    expect(shown.pending).toBe(true);
    // What follows is shown plain (a bounded preview: laying out all of it every frame costs too).
    const preview = shown.parts.at(-1)!;
    expect(preview).toMatch(/^<div class="pending">Paragraph/);
    expect(preview.length).toBeLessThan(PENDING_PREVIEW_CHARS + 64);
    let renders = 1;
    while (shown.pending && renders < 100) {
      frame();
      shown = slow.render(reply, true);
      renders++;
    }
    expect(renders).toBeGreaterThan(1);
    expect(shown).toEqual(unlimited().render(reply, true));
    expect(shown.parts.at(-1)).toContain("The <b>end</b>");
  });

  it("shares one budget between the replies of a frame, each moving on in the frames after", () => {
    const { budget, frame } = slowFrames();
    const [first, second] = [new ReplySegments(budget), new ReplySegments(budget)];
    const a = "A **first** reply, new to this test";
    const b = "A **second** reply, new to this test";
    expect(first.render(a, true)).toEqual({ parts: ["<p>A <strong>first</strong> reply, new to this test</p>\n"], pending: false });
    const waiting = second.render(b, true);
    expect(waiting).toEqual({ parts: [`<div class="pending">${b}</div>`], pending: true });
    // A reply still streaming renders the segment it is writing whatever the budget says.
    expect(new ReplySegments(budget).render("Being *written*", false).parts[0]).toContain("<em>written</em>");
    frame();
    expect(second.render(b, true).parts[0]).toContain("<strong>second</strong>");
    // Remembered now: shown again at no cost even with the budget spent.
    expect(new ReplySegments(budget).render(a, true).pending).toBe(false);
  });

  it("shows a long open code block as plain text while it streams", () => {
    const open = "```rust\n" + "let x = 1;\n".repeat(MAX_LIVE_SEGMENT_CHARS / 10);
    const live = unlimited().render(open, false);
    expect(live.parts.at(-1)).toMatch(/^<div class="pending">/);
    expect(unlimited().render(open + "```\n", true).parts.at(-1)).toContain("hljs");
  });
});
