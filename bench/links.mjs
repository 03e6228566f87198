// Shaped-link benchmark (docs/benchmarks.md, "Links"): Paperclip's SSH and sandbox lanes
// across a real, slow link. The benchmark creates a network namespace, shapes its
// loopback with `tc qdisc … tbf` (no latency is added: this kernel has no netem), starts
// sshd (LogLevel DEBUG1, so every login, channel and command is logged) and a sandbox
// command runner (scripts/harness/sandbox-runner.mjs) inside it, and runs every measured step in a
// fresh process inside it too (bench/links-worker.mjs): upstream's own
// `prepareAdapterExecutionTargetRuntime` + `restoreWorkspace()`, plain and with
// `--import …/register`, interleaved. Per lane and workspace, one sequence of three runs:
//   first          a remote that never saw the workspace (no manifest, empty remote);
//                  its agent edits 100 files remotely;
//   repeat-remote  the next run, after those remote edits were restored;
//   repeat-host    the next run after 100 files changed on the host.
// Each run's agent edits 10 files (100 in the first). Reported per run: wall time of
// prepare + restore, bytes on the wire (the namespace's loopback counter), round trips
// (SSH: logins / channel opens / remote commands from sshd's log; sandbox: runner
// commands), ours against upstream, medians over the rounds. Plain and activated runs
// must leave the same remote tree and the same restored workspace. The namespace is
// removed and every process it held is ended by pid afterwards.
// Usage: node bench/links.mjs [--quick] [--links 1000,100,20] [--lanes ssh,sandbox]
//          [--workspaces source,random,git] [--runs N] [--runner-latency 0,100] [--doc]
//   --runner-latency: the sandbox runner's delay before each command's answer in ms (a
//            provider API's round trip), each value its own rows (column "runner latency").
//   --workspaces: `kind@1000+100` runs that workspace on those links only.
//   --doc:   also writes the table into docs/benchmarks.md (between the links-table markers),
//            with the command that made it (the load goes to the console).
//   --quick: the 100 Mbit/s link, the source-like tree, both lanes, one round; ends with
//            `links: repeat-ssh <t>x time <b>x bytes, repeat-sandbox <t>x time <b>x bytes,
//            first-ssh <t>x, first-sandbox <t>x` (repeat-sandbox: the worse of its two repeats).
// Needs root (ip netns, tc). Workspaces and remote directories live on /dev/shm.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.join(here, "..");
const args = process.argv.slice(2);
const option = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const quick = args.includes("--quick");

const [major, minor] = process.versions.node.split(".").map(Number);
if (major < 24 || (major === 24 && minor < 11)) {
  console.error(
    `bench/links.mjs needs Node >= 24.11 (the activation's module hooks); this is ${process.version} (scripts/setup/node-versions.sh installs one)`,
  );
  process.exit(2);
}

// ── Outside the namespace: create it, run this script inside it, remove it. ──
if (!process.env.PC_LINKS_NS) {
  if (process.getuid?.() !== 0) {
    console.error("bench/links.mjs needs root (ip netns, tc)");
    process.exit(2);
  }
  // sshd and ssh-keygen, installed with apt when missing, and sshd's run directory
  // (scripts/setup/system-packages.sh, as the test and demo commands do).
  execFileSync("bash", ["-c", "source scripts/setup/system-packages.sh && ensure_ssh_packages"], {
    cwd: repo,
    stdio: "inherit",
  });
  if (!["/usr/sbin/sshd", "/usr/local/sbin/sshd", "/usr/bin/sshd"].some((f) => existsSync(f))) {
    console.error("bench/links.mjs needs sshd: apt-get install openssh-server openssh-client");
    process.exit(2);
  }
  const ns = `pclinks${process.pid}`;
  execFileSync("ip", ["netns", "add", ns]);
  let status = 1;
  try {
    // Ethernet-sized packets, as on a real link (tbf drops a packet larger than its burst).
    execFileSync("ip", ["netns", "exec", ns, "ip", "link", "set", "lo", "mtu", "1500", "up"]);
    status = await new Promise((resolve) => {
      const child = spawn("ip", ["netns", "exec", ns, process.execPath, fileURLToPath(import.meta.url), ...args], {
        stdio: "inherit",
        env: { ...process.env, PC_LINKS_NS: ns },
      });
      const forward = (signal) => child.kill(signal);
      process.on("SIGINT", forward);
      process.on("SIGTERM", forward);
      child.on("close", (code) => resolve(code ?? 1));
    });
  } finally {
    // Every process still in the namespace, by pid, then the namespace.
    const pids = spawnSync("ip", ["netns", "pids", ns], { encoding: "utf8" })
      .stdout.split("\n")
      .filter(Boolean)
      .map(Number);
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        /* gone */
      }
    }
    spawnSync("ip", ["netns", "del", ns]);
  }
  process.exit(status);
}

// ── Inside the namespace. ──
const { startSshd } = await import("../__test__/helpers/sshd.js");
const { corpus } = await import("./corpus.mjs");
const links = option("--links", quick ? "100" : "1000,100,20")
  .split(",")
  .map(Number);
const lanes = option("--lanes", "ssh,sandbox").split(",");
// `kind@1000+100`: that workspace on those links only.
const workspaceLinks = new Map(
  option("--workspaces", quick ? "source" : "source,random,git")
    .split(",")
    .map((entry) => {
      const [kind, on] = entry.split("@");
      return [kind, on ? on.split("+").map(Number) : null];
    }),
);
const workspaces = [...workspaceLinks.keys()];
const rounds = Number(option("--runs", quick ? "1" : "3"));
const latencies = option("--runner-latency", "0").split(",").map(Number);
const register = pathToFileURL(path.join(repo, "lib/activation/register.js")).href;
const PINNED = { GIT_AUTHOR_DATE: "2026-01-02T03:04:05Z", GIT_COMMITTER_DATE: "2026-01-02T03:04:05Z" };

const scratch = mkdtempSync(path.join("/dev/shm", "pc-bench-links-"));
const cleanup = [];
process.on("exit", () => {
  for (const fn of cleanup.reverse()) {
    try {
      fn();
    } catch {
      /* best effort */
    }
  }
  rmSync(scratch, { recursive: true, force: true });
});
// Ended from outside: the same clean-up (sshd and the runner by pid, the scratch directory).
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => process.exit(1));

/** Shapes the namespace's loopback to `mbit` Mbit/s (burst large enough for the rate). */
function shape(mbit) {
  const burst = Math.max(64 * 1024, Math.ceil((mbit * 1e6) / 8 / 250));
  execFileSync("tc", [
    "qdisc",
    "replace",
    "dev",
    "lo",
    "root",
    "tbf",
    "rate",
    `${mbit}mbit`,
    "burst",
    String(burst),
    "latency",
    "100ms",
  ]);
}

const server = await startSshd(path.join(scratch, "sshd"), { logLevel: "DEBUG1" });
cleanup.push(() => process.kill(server.pid, "SIGKILL"));
const specFile = path.join(scratch, "spec.json");
writeFileSync(specFile, JSON.stringify(server.spec));
const runnerStats = path.join(scratch, "runner.json");
let runnerPort = 7345;
let runner = null;
/** (Re)starts the sandbox runner with `latencyMs` before each answer. */
async function startRunner(latencyMs) {
  if (runner) runner.kill("SIGKILL");
  runnerPort += 1;
  runner = spawn(
    process.execPath,
    [path.join(repo, "scripts", "harness", "sandbox-runner.mjs"), String(runnerPort), runnerStats, String(latencyMs)],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  await new Promise((resolve) => runner.stdout.once("data", resolve));
}
cleanup.push(() => runner?.kill("SIGKILL"));

/** Logins, channel opens and commands sshd logged so far. */
function sshCounts() {
  const log = readFileSync(server.logPath, "utf8");
  const count = (re) => (log.match(re) ?? []).length;
  return {
    logins: count(/Accepted publickey/g),
    channels: count(/server_input_channel_open: ctype session/g),
    commands: count(/req exec/g),
  };
}
const runnerCommands = () => {
  try {
    return JSON.parse(readFileSync(runnerStats, "utf8")).commands;
  } catch {
    return 0;
  }
};

const git = (dir, ...a) =>
  execFileSync("git", ["-C", dir, "-c", "user.name=Bench", "-c", "user.email=bench@example.com", ...a], {
    env: { ...process.env, ...PINNED },
    stdio: ["ignore", "pipe", "pipe"],
    maxBuffer: 1 << 28,
  });

/** The workspace master copy of one kind. */
function master(kind) {
  const dir = path.join(scratch, `master-${kind}`);
  const source = corpus(kind === "random" ? "a" : "e").dir;
  cpSync(source, dir, { recursive: true, verbatimSymlinks: true });
  if (kind === "git") {
    git(dir, "init", "-q", "-b", "main");
    git(dir, "add", "-A");
    git(dir, "commit", "-q", "-m", "initial");
  }
  return dir;
}

/** Changes `count` source files of `dir` on the host (seeded by `tag`). */
function hostChanges(dir, count, tag) {
  const files = execFileSync("sh", ["-c", "find src -type f | sort | head -n 2000"], { cwd: dir, encoding: "utf8" })
    .split("\n")
    .filter(Boolean);
  for (let i = 0; i < count && files.length > 0; i += 1) {
    const file = path.join(dir, files[(i * 17) % files.length]);
    writeFileSync(file, `// host change ${tag} ${i}\n${readFileSync(file, "utf8")}`);
  }
}

/** One measured run in a fresh process. */
function measure({ lane, mode, workspace, runId, agentEdits, remoteCwd, home }) {
  const before = lane === "ssh" ? sshCounts() : { commands: runnerCommands() };
  const argv = [
    ...(mode === "ours" ? ["--import", register] : []),
    path.join(here, "links-worker.mjs"),
    lane,
    lane === "ssh" ? specFile : String(runnerPort),
    workspace,
    runId,
    String(agentEdits),
    remoteCwd,
  ];
  const out = spawnSync(process.execPath, argv, {
    cwd: repo,
    encoding: "utf8",
    env: { ...process.env, ...PINNED, NODE_OPTIONS: "", PAPERCLIP_HOME: home },
    maxBuffer: 1 << 26,
  });
  if (out.status !== 0) throw new Error(`${lane} ${mode} ${runId} failed: ${out.stderr.slice(-3000)}`);
  const result = JSON.parse(out.stdout.trim().split("\n").pop());
  if (result.active !== (mode === "ours"))
    throw new Error(`${lane} ${mode} ${runId}: the activation was ${result.active ? "" : "not "}active`);
  const after = lane === "ssh" ? sshCounts() : { commands: runnerCommands() };
  const trips =
    lane === "ssh"
      ? `${after.logins - before.logins}/${after.channels - before.channels}/${after.commands - before.commands}`
      : `${after.commands - before.commands}`;
  return {
    ...result,
    ms: result.prepareMs + result.restoreMs,
    bytes: result.prepareBytes + result.restoreBytes,
    trips,
  };
}

/** The three runs of one sequence for one mode; returns { case → result }. */
function sequence({ lane, kind, mode, round }) {
  const workspace = path.join(scratch, `ws-${lane}-${kind}-${mode}-${round}`);
  const home = path.join(scratch, `home-${lane}-${kind}-${mode}-${round}`);
  const remoteCwd = path.join(server.workspace, `${lane}-${kind}-${mode}-${round}`);
  rmSync(workspace, { recursive: true, force: true });
  cpSync(masters.get(kind), workspace, { recursive: true, verbatimSymlinks: true });
  mkdirSync(remoteCwd, { recursive: true });
  const spec = { ...server.spec, remoteCwd };
  writeFileSync(specFile, JSON.stringify(spec));
  const run = (runId, agentEdits) => measure({ lane, mode, workspace, runId, agentEdits, remoteCwd, home });
  const out = {};
  out.first = run("first", 100);
  out["repeat-remote"] = run("repeat-remote", 10);
  hostChanges(workspace, 100, `${round}`);
  out["repeat-host"] = run("repeat-host", 10);
  rmSync(workspace, { recursive: true, force: true });
  rmSync(remoteCwd, { recursive: true, force: true });
  return out;
}

const masters = new Map(workspaces.map((kind) => [kind, master(kind)]));
const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const rows = [];
const summary = {};
console.error(
  `load average at the start: ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")}`,
);
const runs = [];
for (const mbit of links) {
  for (const lane of lanes) {
    for (const latency of lane === "sandbox" ? latencies : [0]) runs.push({ mbit, lane, latency });
  }
}
let shaped = null;
let started = null;
for (const { mbit, lane, latency } of runs) {
  if (shaped !== mbit) shape((shaped = mbit));
  if (lane === "sandbox" && started !== latency) await startRunner((started = latency));
  {
    for (const kind of workspaces) {
      if (workspaceLinks.get(kind) && !workspaceLinks.get(kind).includes(mbit)) continue;
      const samples = { upstream: [], ours: [] };
      for (let round = 0; round < rounds; round += 1) {
        for (const mode of round % 2 === 0 ? ["upstream", "ours"] : ["ours", "upstream"]) {
          samples[mode].push(sequence({ lane, kind, mode, round }));
        }
        const [u, o] = [samples.upstream[round], samples.ours[round]];
        for (const name of Object.keys(u)) {
          if (u[name].remote !== o[name].remote || u[name].local !== o[name].local) {
            throw new Error(
              `${lane} ${kind} ${name}: the activated run's remote tree or restored workspace differs from upstream's`,
            );
          }
        }
      }
      for (const name of ["first", "repeat-remote", "repeat-host"]) {
        const pick = (mode, key) => median(samples[mode].map((s) => s[name][key]));
        const [um, om, ub, ob] = [
          pick("upstream", "ms"),
          pick("ours", "ms"),
          pick("upstream", "bytes"),
          pick("ours", "bytes"),
        ];
        rows.push({
          link: `${mbit} Mbit/s`,
          lane,
          "runner latency": lane === "sandbox" ? `${latency} ms` : "-",
          workspace: kind,
          case: name,
          "upstream s": (um / 1000).toFixed(2),
          "ours s": (om / 1000).toFixed(2),
          time: `${(um / om).toFixed(1)}x`,
          "upstream MB": (ub / 1e6).toFixed(2),
          "ours MB": (ob / 1e6).toFixed(3),
          bytes: `${(ub / ob).toFixed(1)}x`,
          "round trips": `${samples.upstream[0][name].trips} → ${samples.ours[0][name].trips}`,
        });
        console.error(
          `${mbit} Mbit/s ${lane} ${kind} ${name}: upstream ${(um / 1000).toFixed(2)} s ${(ub / 1e6).toFixed(2)} MB, ours ${(om / 1000).toFixed(2)} s ${(ob / 1e6).toFixed(3)} MB`,
        );
        if (kind === "source" && mbit === 100 && latency === latencies[0])
          summary[`${name}-${lane}`] = { time: um / om, bytes: ub / ob };
      }
    }
  }
}
console.table(rows);
// One JSON rows line for bench/run.mjs's summary: the source tree on the 100 Mbit/s link.
const summaryRows = rows
  .filter(
    (r) =>
      r.workspace === "source" &&
      r.link === "100 Mbit/s" &&
      (r["runner latency"] === "-" || r["runner latency"] === `${latencies[0]} ms`),
  )
  .map((r) => ({
    path: `links ${r.lane} ${r.case} (100 Mbit/s)`,
    ours: Number(r["ours s"]) * 1000,
    upstream: Number(r["upstream s"]) * 1000,
    floor: null,
  }));
console.log(JSON.stringify({ rows: summaryRows }));
if (args.includes("--doc")) writeDocTable(rows);
console.log(
  `round trips: SSH logins/channels/commands, sandbox runner commands (upstream → ours); ${rounds} round(s), medians; ${os.cpus().length} cores, load average ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")} at the end; workspaces and remote on /dev/shm`,
);
/** Rewrites the links table of docs/benchmarks.md (between its markers) from `rows`. */
function writeDocTable(table) {
  const doc = path.join(repo, "docs", "benchmarks.md");
  const text = readFileSync(doc, "utf8");
  const start = "<!-- links-table:start -->";
  const end = "<!-- links-table:end -->";
  if (!text.includes(start) || !text.includes(end)) throw new Error(`${doc} has no ${start} … ${end} block`);
  const columns = Object.keys(table[0]);
  const command = `node bench/links.mjs ${args.filter((a) => a !== "--doc").join(" ")}`.trim();
  const block = [
    start,
    `<!-- written by \`${command} --doc\`: do not edit by hand -->`,
    "",
    `\`${command}\` on linux x64, ${os.cpus().length} cores (${os.cpus()[0]?.model ?? "unknown CPU"}), workspaces and remote on tmpfs, ${rounds} round(s), medians. Round trips: SSH logins/channel opens/remote commands, sandbox runner commands, upstream → ours.`,
    "",
    `| ${columns.join(" | ")} |`,
    `|${columns.map(() => "---").join("|")}|`,
    ...table.map((row) => `| ${columns.map((c) => String(row[c]).replace(/\|/g, "\\|")).join(" | ")} |`),
    "",
    end,
  ].join("\n");
  writeFileSync(doc, text.slice(0, text.indexOf(start)) + block + text.slice(text.indexOf(end) + end.length));
}

const fmt = (v) => (v == null ? "-" : `${v.toFixed(1)}x`);
// The sandbox's repeat runs: the worse of the two (remote changes, host changes).
const worse = (key) =>
  summary["repeat-remote-sandbox"] && summary["repeat-host-sandbox"]
    ? Math.min(summary["repeat-remote-sandbox"][key], summary["repeat-host-sandbox"][key])
    : null;
if (summary["repeat-host-ssh"] || summary["first-ssh"] || summary["first-sandbox"]) {
  console.log(
    `links: repeat-ssh ${fmt(summary["repeat-host-ssh"]?.time)} time ${fmt(summary["repeat-host-ssh"]?.bytes)} bytes, repeat-sandbox ${fmt(worse("time"))} time ${fmt(worse("bytes"))} bytes, first-ssh ${fmt(summary["first-ssh"]?.time)}, first-sandbox ${fmt(summary["first-sandbox"]?.time)}`,
  );
}
// sshd and the runner would keep this process alive: end it (the exit handler stops them).
process.exit(0);
