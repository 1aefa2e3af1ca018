import { describe, expect, it, vi } from "vitest";
import { cleanup, render, screen, fireEvent } from "@testing-library/svelte";
import RuntimeView from "./RuntimeView.svelte";
import type { RuntimeReport, SecretsLocation } from "../lib/bindings";
import { runtimeProcess } from "../testing/fixtures";

const report: RuntimeReport = {
  pinnedVersion: "1.18.33",
  opencode: { status: "problem", path: "/x/opencode", message: "The OpenCode runtime at /x/opencode is version 1.17.0, but Hearth needs exactly 1.18.33." },
  ripgrep: { status: "ready", path: "/usr/bin/rg", version: "13.0.0", source: "systemPath" },
  dataDir: "/home/u/.local/share/hearth",
  logDir: "/home/u/.local/share/hearth/logs",
};

const inFile: SecretsLocation = {
  place: "privateFile",
  file: "/home/u/.local/share/hearth/secrets.json",
  summary: "Secrets are kept in a private file /home/u/.local/share/hearth/secrets.json, because no desktop keyring answered.",
};
const loadSecrets = async () => inFile;

describe("RuntimeView", () => {
  it("shows the backend's sentence for a problem, the folders and where secrets are kept", async () => {
    render(RuntimeView, { load: async () => report, loadSecrets });
    expect(await screen.findByTestId("runtime-binary-problem")).toHaveProperty(
      "textContent",
      report.opencode.status === "problem" ? report.opencode.message : "",
    );
    expect(screen.getByTestId("runtime-summary").textContent).toContain("1 problem");
    expect(screen.getByTestId("ripgrep-version").textContent).toBe("13.0.0");
    expect(screen.getByTestId("data-dir").textContent).toBe(report.dataDir);
    expect(screen.getByTestId("secrets-location").textContent).toBe(inFile.summary);
  });

  it("shows a failed check as an alert, and checks again on request", async () => {
    let calls = 0;
    const load = async () => {
      calls += 1;
      if (calls === 1) throw new Error("The backend is unreachable.");
      return { ...report, opencode: { status: "ready", path: "/n/opencode", version: "1.18.33", source: "nodeModules" } } as RuntimeReport;
    };
    render(RuntimeView, { load, loadSecrets: async () => ({ place: "desktopKeyring", file: null, summary: "Secrets are kept in the desktop keyring (Secret Service)." }) as SecretsLocation });
    expect((await screen.findByRole("alert")).textContent).toBe("The backend is unreachable.");
    await fireEvent.click(screen.getByTestId("runtime-recheck"));
    expect((await screen.findByTestId("runtime-binary-version")).textContent).toBe("1.18.33");
    expect(screen.getByTestId("runtime-summary").dataset.ok).toBe("true");
    expect(calls).toBe(2);
    expect(screen.getByTestId("secrets-location").dataset.place).toBe("desktopKeyring");
  });
});

describe("RuntimeView: the chosen binary and restarts", () => {
  const wrong: RuntimeReport = {
    ...report,
    opencode: {
      status: "problem",
      path: "/tmp/opencode-old",
      message: "The OpenCode runtime at /tmp/opencode-old is version 1.17.2, but Hearth needs exactly 1.18.33. Choose the binary of opencode-ai@1.18.33 in the Runtime view, or clear your choice there to use the copy Hearth finds itself.",
    },
  };
  const ready: RuntimeReport = { ...report, opencode: { status: "ready", path: "/n/opencode", version: "1.18.33", source: "nodeModules" } };

  it("shows the refusal of a chosen binary, and clearing the choice checks again", async () => {
    let chosen: string | null = null;
    const sets: (string | null)[] = [];
    const choice = {
      current: async () => chosen,
      choose: async () => "/tmp/opencode-old",
      set: async (p: string | null) => {
        sets.push(p);
        chosen = p;
      },
    };
    render(RuntimeView, { load: async () => (chosen ? wrong : ready), loadSecrets, choice });
    expect((await screen.findByTestId("runtime-choice-auto")).textContent).toContain("Hearth finds the runtime itself");
    await fireEvent.click(screen.getByTestId("runtime-choose"));
    expect((await screen.findByTestId("runtime-choice-path")).textContent).toBe("/tmp/opencode-old");
    expect(screen.getByTestId("runtime-binary-problem").textContent).toContain("is version 1.17.2");
    expect(screen.getByTestId("runtime-summary").dataset.ok).toBe("false");
    await fireEvent.click(screen.getByTestId("runtime-choice-clear"));
    await screen.findByTestId("runtime-choice-auto");
    expect((await screen.findByTestId("runtime-binary-version")).textContent).toBe("1.18.33");
    expect(sets).toEqual(["/tmp/opencode-old", null]);
  });

  it("a cancelled dialog changes nothing; a refused choice is shown", async () => {
    const set = vi.fn(async () => {
      throw new Error("Choose the runtime binary by its full path; “opencode” is a relative one.");
    });
    let picked: string | null = null;
    render(RuntimeView, { load: async () => ready, loadSecrets, choice: { current: async () => null, choose: async () => picked, set } });
    await fireEvent.click(await screen.findByTestId("runtime-choose"));
    expect(set).not.toHaveBeenCalled();
    picked = "opencode";
    await fireEvent.click(screen.getByTestId("runtime-choose"));
    expect((await screen.findByTestId("runtime-choice-error")).textContent).toContain("relative");
  });

  it("shows how often the runtime was restarted and how its last process ended", async () => {
    render(RuntimeView, { load: async () => ready, loadSecrets, loadProcesses: async () => [runtimeProcess(1, null)] });
    await screen.findByTestId("runtime-processes");
    expect(screen.queryByTestId("runtime-restarts")).toBeNull();
    cleanup();
    render(RuntimeView, { load: async () => ready, loadSecrets, loadProcesses: async () => [runtimeProcess(3, "signal: 9 (SIGKILL)")] });
    expect((await screen.findByTestId("runtime-restarts")).textContent).toBe("restarted 2 times; last exit: signal: 9 (SIGKILL)");
  });

  it("names the host of a runtime on another machine, with its uptime and its memory there", async () => {
    const local = runtimeProcess(1, null);
    const remote = runtimeProcess(1, null);
    remote.ownerId = 2;
    remote.slot = "opencode:ssh:build-box";
    remote.runtime = { ...remote.runtime, host: "build-box", uptimeMs: 5 * 60000, hostMemory: { rssBytes: 300 * 1024 * 1024, processes: 4 } };
    render(RuntimeView, { load: async () => ready, loadSecrets, loadProcesses: async () => [local, remote] });
    await screen.findByTestId("runtime-processes");
    const [here, there] = screen.getAllByTestId("runtime-process").map((p) => p.textContent ?? "");
    expect(here).not.toContain(" on ");
    expect(there).toContain("on build-box · up 5 min · 300 MiB there");
  });

  it("says when no runtime runs yet", async () => {
    render(RuntimeView, { load: async () => ready, loadSecrets });
    expect((await screen.findByTestId("runtime-not-running")).textContent).toContain("starts with the first message");
  });
});
