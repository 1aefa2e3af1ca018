import { defineConfig } from "vite";
import { svelte } from "@sveltejs/vite-plugin-svelte";

// The UI lives in ui/ and is built to ui/dist, which the Tauri crate embeds at compile time.
export default defineConfig({
  root: "ui",
  plugins: [svelte()],
  clearScreen: false,
  build: { outDir: "dist", emptyOutDir: true, target: "safari15", sourcemap: false },
  resolve: process.env.VITEST ? { conditions: ["browser"] } : undefined,
  test: {
    root: ".",
    include: ["ui/src/**/*.test.ts"],
    environment: "jsdom",
    setupFiles: ["ui/src/test-setup.ts"],
  },
});
