// A network namespace joined to this host by a veth pair, for fault injection on a real link
// (__test__/faults-ssh.test.js): a server started inside it (helpers/sshd.js `prefix`) is
// reached at `nsAddress`, and the link can be taken down (nothing passes either way) or made
// to drop the namespace's replies (a blackhole route inside it back to this host), then
// restored. Needs root and `ip` (iproute2); `netnsSupport()` says why not where it cannot run.
import { execFileSync, spawnSync } from "node:child_process";

/** `null` when namespaces can be made here, else why not. */
export function netnsSupport() {
  if (process.getuid?.() !== 0) return "needs root (ip netns)";
  if (spawnSync("ip", ["-V"]).status !== 0) return "needs ip (iproute2)";
  const probe = `pcfprobe${process.pid}`;
  const made = spawnSync("ip", ["netns", "add", probe]);
  if (made.status !== 0) return `ip netns add failed: ${String(made.stderr).trim()}`;
  spawnSync("ip", ["netns", "del", probe]);
  return null;
}

function ip(...args) {
  execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"] });
}

/**
 * A namespace named after this process with a veth pair to it (a /30 of 10.x, also after
 * this process, so concurrent runs do not meet). Returns its name, both addresses, the
 * command prefix that runs a program inside it, the faults and `destroy()`.
 */
export function createNetns() {
  const id = process.pid;
  const ns = `pcf${id}`;
  const hostIf = `pcfh${id}`;
  const nsIf = `pcfn${id}`;
  const subnet = `10.${200 + ((id >> 8) % 50)}.${id % 256}`;
  const hostAddress = `${subnet}.1`;
  const nsAddress = `${subnet}.2`;
  ip("netns", "add", ns);
  try {
    ip("link", "add", hostIf, "type", "veth", "peer", "name", nsIf);
    ip("link", "set", nsIf, "netns", ns);
    ip("addr", "add", `${hostAddress}/30`, "dev", hostIf);
    ip("link", "set", hostIf, "up");
    ip("-n", ns, "addr", "add", `${nsAddress}/30`, "dev", nsIf);
    ip("-n", ns, "link", "set", nsIf, "up");
    ip("-n", ns, "link", "set", "lo", "up");
    // The namespace's hardware address known for good: with the link down, packets to it are
    // dropped at the dead link, not refused by a failed address resolution (EHOSTUNREACH).
    const mac = /link\/ether (\S+)/.exec(
      execFileSync("ip", ["-n", ns, "-o", "link", "show", nsIf], { encoding: "utf8" }),
    )[1];
    ip("neigh", "replace", nsAddress, "lladdr", mac, "dev", hostIf, "nud", "permanent");
  } catch (error) {
    spawnSync("ip", ["netns", "del", ns]);
    spawnSync("ip", ["link", "del", hostIf]);
    throw error;
  }
  let fault = null;
  return {
    ns,
    hostAddress,
    nsAddress,
    prefix: ["ip", "netns", "exec", ns],
    /** Which fault is on (`null`: none). */
    fault: () => fault,
    /**
     * The namespace's end of the link goes down: nothing passes either way, and this host's
     * route stays (its packets are dropped at the dead link, not sent elsewhere, and not
     * refused either: the neighbour entry is permanent).
     */
    linkDown() {
      ip("-n", ns, "link", "set", nsIf, "down");
      fault = "link-down";
    },
    /** The namespace drops every packet it sends back to this host; what this host sends arrives. */
    dropReplies() {
      ip("-n", ns, "route", "add", "blackhole", `${hostAddress}/32`);
      fault = "replies-dropped";
    },
    /** Undoes the fault that is on. */
    restore() {
      if (fault === "link-down") ip("-n", ns, "link", "set", nsIf, "up");
      if (fault === "replies-dropped") ip("-n", ns, "route", "del", "blackhole", `${hostAddress}/32`);
      fault = null;
    },
    /** Removes the namespace (its end of the pair goes with it, and so the pair). */
    destroy() {
      spawnSync("ip", ["netns", "del", ns]);
      spawnSync("ip", ["link", "del", hostIf]);
    },
  };
}
