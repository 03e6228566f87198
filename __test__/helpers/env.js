// Environment variables a suite sets for its tests, put back as they were (vitest hooks).
import { afterAll, afterEach, beforeAll } from "vitest";

/** The values of `names` now, to put back later (`undefined`: unset). */
function saved(names) {
  return Object.fromEntries(names.map((name) => [name, process.env[name]]));
}

function putBack(values) {
  for (const [name, value] of Object.entries(values)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
}

/** Puts `names` back as they were before the suite after each test (a test sets them freely). */
export function restoreEnvAfterEach(...names) {
  const values = saved(names);
  afterEach(() => putBack(values));
}

/** Sets `values` before the suite's tests and puts them back after them. */
export function envForSuite(values) {
  const before = saved(Object.keys(values));
  beforeAll(() => {
    Object.assign(process.env, values);
  });
  afterAll(() => putBack(before));
}
