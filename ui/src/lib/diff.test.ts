import { describe, expect, it } from "vitest";
import type { DiffLine } from "./bindings";
import { highlightLine, languageOf, splitRows } from "./diff";

const line = (kind: DiffLine["kind"], text: string, oldLine: number | null, newLine: number | null): DiffLine => ({ kind, text, oldLine, newLine });

describe("diff rows", () => {
  it("faces each run of removed lines with the added lines that replaced it", () => {
    const rows = splitRows([
      line("hunk", "@@ -1,4 +1,4 @@", null, null),
      line("context", "a", 1, 1),
      line("removed", "b", 2, null),
      line("removed", "c", 3, null),
      line("added", "B", null, 2),
      line("context", "d", 4, 3),
      line("added", "e", null, 4),
    ]);
    const shown = rows.map((r) => (r.kind === "hunk" ? r.text : `${r.left?.text ?? "·"}|${r.right?.text ?? "·"}`));
    expect(shown).toEqual(["@@ -1,4 +1,4 @@", "a|a", "b|B", "c|·", "d|d", "·|e"]);
  });

  it("highlights known languages and escapes everything else", () => {
    expect(languageOf("src/main.rs")).toBe("rust");
    expect(languageOf("notes.unknownext")).toBeUndefined();
    expect(highlightLine("<script>", undefined)).toBe("&lt;script&gt;");
    expect(highlightLine("let x = 1;", "rust")).toContain("hljs-keyword");
  });
});
