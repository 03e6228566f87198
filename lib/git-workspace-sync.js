// Drop-in for the constants of `@paperclipai/adapter-utils/git-workspace-sync`.
export const GIT_ARCHIVE_EXCLUDES = [".git", ".git/*"];
