
/**
 * Which binding artifact the generated loader actually loaded: `'native'` for
 * a native addon, otherwise the `platformArchABI` of the WASI flavor. Every
 * flavor napi-rs can build is listed, because `NAPI_RS_NATIVE_LIBRARY_PATH`
 * can point the loader at a WASI artifact this package does not build itself.
 */
export declare const __napiBindingTarget: 'native' | 'wasm32-wasi' | 'wasm32-wasip1'

/**
 * Upstream `escapeTarExcludeLiteral`: doubles each backslash, then escapes `*`, `?` and `[`
 * so that tar reads the entry as a literal name.
 */
export declare function escapeTarExcludeLiteral(entry: string): string

/**
 * Upstream `excludePatternMatches`: `*\/X/*` and `*\/X` match the segment `X` at any depth
 * (and below it), `X/*` matches what lies below the root-anchored `X`, and any other pattern
 * is a literal, root-anchored path-or-descendant match.
 */
export declare function excludePatternMatches(relative: string, pattern: string): boolean

/** True when `relative` equals `candidate` or lies below it (`candidate + "/"` prefix). */
export declare function isRelativePathOrDescendant(relative: string, candidate: string): boolean

/**
 * Upstream `mergeExcludes`, taking the groups as one array: concatenated in order, absent
 * groups skipped, duplicates removed with the first occurrence kept.
 */
export declare function mergeExcludeGroups(groups: Array<Array<string> | undefined | null>): Array<string>

/** Upstream `shouldExcludePath`: true when any entry of `exclude` matches `relative`. */
export declare function shouldExcludePath(relative: string, exclude: Array<string>): boolean
