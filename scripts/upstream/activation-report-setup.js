// A setup file of scripts/activation-suites.mjs: after each test file, appends what the
// activation served in this worker (nativeActivation()) to $PAPERCLIP_ADAPTER_UTILS_NATIVE_REPORT.
import { appendFileSync } from "node:fs";
import { afterAll } from "vitest";

const KEY = Symbol.for("paperclipai.adapterUtilsNative.activation");

afterAll(() => {
  const file = process.env.PAPERCLIP_ADAPTER_UTILS_NATIVE_REPORT;
  const store = globalThis[KEY];
  if (!file) return;
  const modules = store ? [...store.modules.values()].map((m) => m.module) : [];
  appendFileSync(file, `${JSON.stringify({ mechanism: store?.mechanism ?? null, modules })}\n`);
});
