/** The exclude entries that keep a `.git` directory (and its contents) out of an archive. */
export declare const GIT_ARCHIVE_EXCLUDES: readonly [".git", ".git/*"];
