//! The upstream exclude matcher and tar-exclude escaping, synchronous.
//!
//! Strings cross as UTF-16 code units so that every JS string, ill-formed ones included,
//! is matched exactly as the upstream JavaScript matches it.

use napi::bindgen_prelude::Utf16String;
use napi_derive::napi;
use paperclip_sync_core::exclude;

/// True when `relative` equals `candidate` or lies below it (`candidate + "/"` prefix).
#[napi]
pub fn is_relative_path_or_descendant(relative: Utf16String, candidate: Utf16String) -> bool {
    exclude::is_relative_path_or_descendant(&relative, &candidate)
}

/// Upstream `excludePatternMatches`: `*/X/*` and `*/X` match the segment `X` at any depth
/// (and below it), `X/*` matches what lies below the root-anchored `X`, and any other pattern
/// is a literal, root-anchored path-or-descendant match.
#[napi]
pub fn exclude_pattern_matches(relative: Utf16String, pattern: Utf16String) -> bool {
    exclude::exclude_pattern_matches(&relative, &pattern)
}

/// Upstream `shouldExcludePath`: true when any entry of `exclude` matches `relative`.
#[napi]
pub fn should_exclude_path(relative: Utf16String, exclude: Vec<Utf16String>) -> bool {
    exclude::should_exclude_path(&relative, exclude.iter().map(|p| &p[..]))
}

/// Upstream `escapeTarExcludeLiteral`: doubles each backslash, then escapes `*`, `?` and `[`
/// so that tar reads the entry as a literal name.
#[napi]
pub fn escape_tar_exclude_literal(entry: Utf16String) -> Utf16String {
    exclude::escape_tar_exclude_literal(&entry).into()
}

/// Upstream `mergeExcludes`, taking the groups as one array: concatenated in order, absent
/// groups skipped, duplicates removed with the first occurrence kept.
#[napi]
pub fn merge_exclude_groups(groups: Vec<Option<Vec<Utf16String>>>) -> Vec<Utf16String> {
    let groups: Vec<Option<Vec<Vec<u16>>>> =
        groups.into_iter().map(|g| g.map(|g| g.into_iter().map(|s| s.to_vec()).collect())).collect();
    exclude::merge_excludes(&groups).into_iter().map(Utf16String::from).collect()
}
