// The sync scheduler: ordered tasks, at most `bound` running when concurrency is allowed
// (one at a time otherwise), every started task settled before it returns.

/** Upstream's bound on concurrent sync operations. */
export const SYNC_CONCURRENCY = 4;

/** Runs `tasks` (thunks) and resolves their settled results in input order. */
export async function scheduleSyncOperations(tasks, concurrent, bound = SYNC_CONCURRENCY) {
  const results = Array.from({ length: tasks.length });
  const limit = concurrent && Number.isFinite(Math.floor(bound)) && Math.floor(bound) >= 1 ? Math.floor(bound) : 1;
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const index = next;
      next += 1;
      try {
        results[index] = { status: "fulfilled", value: await tasks[index]() };
      } catch (reason) {
        results[index] = { status: "rejected", reason };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, tasks.length) }, worker));
  return results;
}
