import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["__test__/**/*.test.js"],
    environment: "node",
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
