/** Options of {@link adapterUtilsNative}. */
export interface AdapterUtilsNativeOptions {
  /**
   * Also compose upstream modules vitest leaves to Node (externalized dependencies), through
   * a setup file that installs the Node hook in each worker. Default true.
   */
  externalized?: boolean;
}
/**
 * The Vite plugin that runs the native drop-ins inside vitest's module graph:
 * `plugins: [adapterUtilsNative()]` in `vitest.config.ts`. Module ids stay upstream's, so
 * `vi.mock("@paperclipai/adapter-utils/ssh")` and `vi.importActual` keep working.
 */
export declare function adapterUtilsNative(options?: AdapterUtilsNativeOptions): {
  name: string;
  enforce: "pre";
  config(config: { test?: { setupFiles?: string | string[] } }): Promise<undefined>;
  load(id: string): Promise<string | null>;
};
export default adapterUtilsNative;
