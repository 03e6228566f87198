/** What the activation serves for one installed upstream package. */
export interface NativeActivationUpstream {
  /** The package's directory. */
  root: string;
  version: string;
  /** Upstream module → the names served natively (modules appear once loaded). */
  modules: Record<string, string[]>;
  /**
   * Upstream module → why it was left upstream's (the workspace opt-in serves a module only
   * where it is identical to a verified upstream's); empty for a verified version.
   */
  refused: Record<string, string>;
}
/** What {@link nativeActivation} reports. */
export interface NativeActivation {
  /** A mechanism is installed and nothing turned the activation off. */
  active: boolean;
  /** `"node-hooks"` (`--import …/register`), `"vitest-plugin"`, both joined by `+`, or null. */
  mechanism: string | null;
  /** Why the activation is off, when it is. */
  reason: string | null;
  /** The upstream versions the drop-ins were verified against. */
  verifiedVersions: string[];
  upstream: NativeActivationUpstream[];
  /** Upstream packages left untouched, with the reason (and, per module, why it was refused). */
  skipped: { root: string; version: string | null; reason: string; refused?: Record<string, string> }[];
}
/**
 * Whether the activation (`node --import @paperclipai/adapter-utils-native/register` or the
 * vitest plugin) is on in this process, the upstream version found, and per upstream module
 * the names served natively.
 */
export declare function nativeActivation(): NativeActivation;
