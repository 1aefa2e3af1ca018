import { describe, expect, it, vi } from "vitest";
import { render, screen } from "@testing-library/svelte";
import type { Conversation, ConversationUpdate } from "../lib/bindings";

const listMessages = vi.fn();
let deliver: (e: { payload: ConversationUpdate }) => void = () => {};
vi.mock("../lib/bindings", () => ({
  commands: { listMessages: (id: string) => listMessages(id), listLibraries: async () => ({ status: "ok", data: [] }) },
  events: {
    conversationUpdated: {
      listen: async (f: (e: { payload: ConversationUpdate }) => void) => {
        deliver = f;
        return () => {};
      },
    },
  },
}));

// jsdom lays nothing out: the list's scrolling and measuring have nothing to do.
Element.prototype.scrollTo = () => {};
globalThis.ResizeObserver ??= class {
  observe() {}
  unobserve() {}
  disconnect() {}
} as unknown as typeof ResizeObserver;

const { default: ConversationView } = await import("./ConversationView.svelte");

const conversation: Conversation = {
  id: "c1",
  projectId: "p1",
  title: "Talk",
  workMode: "execute",
  profileId: null,
  nativeSessionId: null,
  libraryIds: [],
  createdAt: 1,
  updatedAt: 1,
  compactedAt: null,
} as unknown as Conversation;

describe("ConversationView", () => {
  it("keeps a pending permission prompt when the parent hands in the same conversation again", async () => {
    listMessages.mockResolvedValue({ status: "ok", data: [] });
    const view = render(ConversationView, { conversation, profiles: [], onchanged: () => {} });
    await vi.waitFor(() => expect(listMessages).toHaveBeenCalledOnce());
    deliver({ payload: { conversationId: "c1", kind: { type: "runtime", messageId: "m1", event: { type: "permissionAsked", permissionId: "per_1", permission: "external_directory", patterns: ["/etc/*"] } } } });
    expect(await screen.findByTestId("permission-prompt")).toBeTruthy();
    // A reload after a setting changed: a new object, the same conversation.
    await view.rerender({ conversation: { ...conversation, libraryIds: ["1"] }, profiles: [], onchanged: () => {} });
    expect(screen.getByTestId("permission-prompt")).toBeTruthy();
    expect(listMessages).toHaveBeenCalledOnce();
  });
});
