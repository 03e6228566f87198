// The CLI's argument parsing (cli/args.js over node:util.parseArgs): defaults, repeated
// and optional-value options, `--`, and parse errors as one-line usage errors.
import { describe, expect, it } from "vitest";
import { parseCommandArgs, UsageError } from "../cli/args.js";

const OPTIONS = {
  out: { type: "string" },
  gzip: { type: "string" },
  exclude: { type: "string", multiple: true },
  json: { type: "boolean" },
  z: { type: "boolean", short: "z" },
};
const parse = (...argv) => parseCommandArgs(argv, OPTIONS, { optionalValue: ["gzip"] });
const usage = (...argv) => {
  try {
    parse(...argv);
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError);
    return error.message;
  }
  throw new Error(`no usage error for ${argv.join(" ")}`);
};

describe("parseCommandArgs", () => {
  it("fills defaults and keeps positionals in order, '-' included", () => {
    expect(parse("a", "-", "b")).toEqual({
      values: { exclude: [], json: false, z: false },
      positionals: ["a", "-", "b"],
    });
  });

  it("collects repeated options, takes the last single value, and knows -z and -h", () => {
    const { values } = parse("--exclude", "x", "--exclude=y", "--out", "1", "--out=2", "-z", "-h");
    expect(values).toMatchObject({ exclude: ["x", "y"], out: "2", z: true, help: true });
  });

  it("takes an optional value inline or leaves it out, but not from the next argument", () => {
    expect(parse("--gzip").values.gzip).toBe(true);
    expect(parse("--gzip=0").values.gzip).toBe("0");
    expect(parse("--gzip", "dir")).toMatchObject({ values: { gzip: true }, positionals: ["dir"] });
    expect(parse("dir").values.gzip).toBeUndefined();
  });

  it("stops at --: what follows is positional, even an optional-value flag", () => {
    expect(parse("--", "--json", "--gzip")).toMatchObject({
      values: { json: false },
      positionals: ["--json", "--gzip"],
    });
  });

  it("turns parse errors into one-line usage errors", () => {
    expect(usage("--nope")).toBe("unknown option --nope");
    expect(usage("-q")).toBe("unknown option -q");
    expect(usage("--out")).toBe("--out needs a value");
    expect(usage("--json=yes")).toBe("--json takes no value");
    expect(usage("--out", "--json")).toMatch(/^option '--out' argument is ambiguous/);
  });
});
