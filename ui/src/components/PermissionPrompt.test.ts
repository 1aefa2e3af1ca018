import { describe, expect, it, vi } from "vitest";
import { fireEvent, render, screen } from "@testing-library/svelte";
import PermissionPrompt from "./PermissionPrompt.svelte";
import type { PendingPermission } from "../lib/conversation";

const outside: PendingPermission = { messageId: "m1", permissionId: "per_1", permission: "external_directory", patterns: ["/etc/*"] };

describe("PermissionPrompt", () => {
  it("says which permission, for which paths, and offers the three answers", async () => {
    const onanswer = vi.fn(async () => {});
    render(PermissionPrompt, { request: outside, onanswer });
    expect(screen.getByTestId("permission-headline").textContent).toBe("The agent wants to reach outside this project folder.");
    expect(screen.getByTestId("permission-name").textContent).toBe("external_directory");
    expect(screen.getAllByTestId("permission-path").map((e) => e.textContent)).toEqual(["/etc/*"]);
    expect(screen.getByTestId("permission-once").textContent).toBe("Allow once");
    expect(screen.getByTestId("permission-always").textContent).toBe("Always allow in this conversation");
    expect(screen.getByTestId("permission-always").title).toContain("Other conversations are still asked");
    expect(screen.getByTestId("permission-reject").textContent).toBe("Reject");
    for (const [id, reply] of [["permission-once", "once"], ["permission-always", "always"], ["permission-reject", "reject"]] as const) {
      await fireEvent.click(screen.getByTestId(id));
      await vi.waitFor(() => expect(onanswer).toHaveBeenLastCalledWith(reply));
    }
  });

  it("names an unfamiliar permission as the runtime sent it, and takes one answer at a time", async () => {
    // The caller shows a failed answer and keeps the prompt: it can be answered again.
    let settle = () => {};
    const onanswer = vi.fn(() => new Promise<void>((r) => (settle = r)));
    render(PermissionPrompt, { request: { ...outside, permission: "webfetch", patterns: [] }, onanswer });
    expect(screen.getByTestId("permission-headline").textContent).toBe("The agent asks for the permission “webfetch”.");
    expect(screen.queryAllByTestId("permission-path")).toEqual([]);
    await fireEvent.click(screen.getByTestId("permission-once"));
    expect((screen.getByTestId("permission-reject") as HTMLButtonElement).disabled).toBe(true);
    settle();
    await vi.waitFor(() => expect((screen.getByTestId("permission-reject") as HTMLButtonElement).disabled).toBe(false));
    await fireEvent.click(screen.getByTestId("permission-reject"));
    expect(onanswer).toHaveBeenLastCalledWith("reject");
  });
});
