import { beforeEach, describe, expect, it, vi } from "vitest";
import { fireEvent, render, screen } from "@testing-library/svelte";
import type { Conversation, ConversationUpdate } from "../lib/bindings";
import { conversation as baseConversation } from "../testing/fixtures";

const conversationSnapshot = vi.fn();
const undoTurn = vi.fn();
/** As the backend answers: OpenCode's server offers everything, an ACP agent none of it. */
const runtimeFeatures = (choice: { family: string }) => {
  const all = choice.family === "openCode";
  return { compact: all, undo: all, fork: all };
};
let deliver: (e: { payload: ConversationUpdate }) => void = () => {};
vi.mock("../lib/bindings", () => ({
  commands: {
    conversationSnapshot: (id: string) => conversationSnapshot(id),
    listLibraries: async () => ({ status: "ok", data: [] }),
    conversationPlan: async () => ({ status: "ok", data: [] }),
    undoTurn: (c: string, r: string, force: boolean) => undoTurn(c, r, force),
    runtimeFeatures: async (choice: { family: string }) => runtimeFeatures(choice),
  },
  events: {
    conversationUpdated: {
      listen: async (f: (e: { payload: ConversationUpdate }) => void) => {
        deliver = f;
        return () => {};
      },
    },
  },
}));

vi.mock("virtua/svelte", async () => ({ Virtualizer: (await import("../testing/PlainList.svelte")).default }));

// jsdom lays nothing out: the list's scrolling and measuring have nothing to do.
Element.prototype.scrollTo = () => {};
globalThis.ResizeObserver ??= class {
  observe() {}
  unobserve() {}
  disconnect() {}
} as unknown as typeof ResizeObserver;

const { default: ConversationView } = await import("./ConversationView.svelte");

const conversation: Conversation = baseConversation();

const reply = { id: "r1", conversationId: "c1", role: "assistant", text: "PRO", status: "streaming", error: null, createdAt: 1, updatedAt: 1, toolCalls: [], attachments: [], usage: null, changes: null };
const changedFile = { path: "b.txt", kind: "added", additions: 1, deletions: 0, binary: false, tooLarge: false };
const edited = { ...reply, text: "Done", status: "done", changes: { state: "kept", list: { files: [changedFile], totalFiles: 1, additions: 1, deletions: 0 } } };
const delta = (seq: number, text: string): ConversationUpdate => ({ conversationId: "c1", seq, kind: { type: "runtime", messageId: "r1", event: { type: "textDelta", text } } });

describe("ConversationView", () => {
  beforeEach(() => conversationSnapshot.mockReset());

  it("opened while a reply streams, shows the text streamed while it loaded exactly once", async () => {
    let resolve!: (v: unknown) => void;
    conversationSnapshot.mockReturnValue(new Promise((r) => (resolve = r)));
    render(ConversationView, { conversation, profiles: [], onchanged: () => {} });
    // The view listens before it asks for the snapshot, so nothing sent in between is missed.
    await vi.waitFor(() => expect(conversationSnapshot).toHaveBeenCalledOnce());
    deliver({ payload: delta(7, "PRO") }); // already in the snapshot
    deliver({ payload: delta(8, "JECT") }); // not yet
    resolve({ status: "ok", data: { messages: [reply], updateSeq: 7 } });
    expect(await screen.findByText("PROJECT")).toBeTruthy();
    deliver({ payload: delta(9, "_7") });
    expect(await screen.findByText("PROJECT_7")).toBeTruthy();
  });

  it("keeps a pending permission prompt when the parent hands in the same conversation again", async () => {
    conversationSnapshot.mockResolvedValue({ status: "ok", data: { messages: [], updateSeq: 0 } });
    const view = render(ConversationView, { conversation, profiles: [], onchanged: () => {} });
    await vi.waitFor(() => expect(conversationSnapshot).toHaveBeenCalledOnce());
    deliver({ payload: { conversationId: "c1", seq: 1, kind: { type: "runtime", messageId: "m1", event: { type: "permissionAsked", permissionId: "per_1", permission: "external_directory", patterns: ["/etc/*"] } } } });
    expect(await screen.findByTestId("permission-prompt")).toBeTruthy();
    // A reload after a setting changed: a new object, the same conversation.
    await view.rerender({ conversation: { ...conversation, libraryIds: ["1"] }, profiles: [], onchanged: () => {} });
    expect(screen.getByTestId("permission-prompt")).toBeTruthy();
    expect(conversationSnapshot).toHaveBeenCalledOnce();
  });

  it("names the files an undo would overwrite and undoes only when the user says so", async () => {
    conversationSnapshot.mockResolvedValue({ status: "ok", data: { messages: [edited], updateSeq: 1 } });
    undoTurn.mockResolvedValueOnce({ status: "error", error: { code: "changeConflict", message: "Nothing was changed: b.txt (edited since)." } });
    undoTurn.mockResolvedValueOnce({ status: "ok", data: null });
    render(ConversationView, { conversation, profiles: [], onchanged: () => {} });
    expect((await screen.findByTestId("changes-summary")).textContent).toMatch(/1 file changed/);
    await fireEvent.click(screen.getByTestId("undo-turn"));
    expect((await screen.findByTestId("undo-conflict")).textContent).toContain("b.txt (edited since)");
    expect(undoTurn).toHaveBeenLastCalledWith("c1", "r1", false);
    await fireEvent.click(screen.getByTestId("undo-anyway"));
    await vi.waitFor(() => expect(undoTurn).toHaveBeenLastCalledWith("c1", "r1", true));
    await vi.waitFor(() => expect(screen.queryByTestId("undo-conflict")).toBeNull());
  });

  it("on an ACP agent, lists a turn's changes without offering undo, fork or compact", async () => {
    const onAgent = { ...conversation, nativeSessionId: "ses_1", runtime: { family: "acp" as const, agent: "claude-code" } };
    conversationSnapshot.mockResolvedValue({ status: "ok", data: { messages: [edited], updateSeq: 0 } });
    render(ConversationView, { conversation: onAgent, profiles: [], onchanged: () => {} });
    expect((await screen.findByTestId("changes-summary")).textContent).toContain("1 file changed");
    await vi.waitFor(() => expect(screen.queryByTestId("compact-button")).toBeNull());
    expect(screen.queryByTestId("undo-turn")).toBeNull();
    expect(screen.queryByTestId("fork-here")).toBeNull();
    expect(screen.getByTestId("turn-changes").textContent).toContain("Undo is not offered on this runtime");
  });
});
