import { describe, expect, it } from "vitest";
import { snippetParts } from "./snippet";

describe("snippetParts", () => {
  it("marks the matched words", () => {
    expect(snippetParts("the «Ember» protocol and «Handshake»")).toEqual([
      { text: "the ", hit: false },
      { text: "Ember", hit: true },
      { text: " protocol and ", hit: false },
      { text: "Handshake", hit: true },
    ]);
  });

  it("keeps unpaired markers and markup as plain text", () => {
    expect(snippetParts("a » b « c")).toEqual([{ text: "a » b « c", hit: false }]);
    expect(snippetParts("<b>«x»</b>")).toEqual([
      { text: "<b>", hit: false },
      { text: "x", hit: true },
      { text: "</b>", hit: false },
    ]);
  });

  it("gives nothing for an empty snippet", () => {
    expect(snippetParts("")).toEqual([]);
  });
});
