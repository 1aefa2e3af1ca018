import { describe, expect, it } from "vitest";
import { render, screen, fireEvent } from "@testing-library/svelte";
import RuntimeView from "./RuntimeView.svelte";
import type { RuntimeReport, SecretsLocation } from "../lib/bindings";

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
