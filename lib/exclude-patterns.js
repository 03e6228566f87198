// Drop-in for `@paperclipai/adapter-utils/exclude-patterns`: the one Rust matcher, called
// synchronously (strings cross as UTF-16 so every JS string matches exactly as upstream).
import { native } from "./native.js";

export function isRelativePathOrDescendant(relative, candidate) {
  return native.isRelativePathOrDescendant(relative, candidate);
}

export function excludePatternMatches(relative, pattern) {
  return native.excludePatternMatches(relative, pattern);
}

export function shouldExcludePath(relative, exclude) {
  return native.shouldExcludePath(relative, exclude);
}
