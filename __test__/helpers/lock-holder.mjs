// Holds the directory-merge lock of a target in its own process until stdin says "release"
// (or closes). Usage: node lock-holder.mjs <ours|upstream> <targetDir>
// Prints "held <pid>" once it holds the lock and "released" after.
import * as upstream from "@paperclipai/adapter-utils/workspace-restore-merge";
import * as ours from "@paperclipai/adapter-utils-native/workspace-restore-merge";

const [impl, target] = process.argv.slice(2);
const { withDirectoryMergeLock } = impl === "ours" ? ours : upstream;
await withDirectoryMergeLock(target, async () => {
  process.stdout.write(`held ${process.pid}\n`);
  await new Promise((resolve) => {
    process.stdin.on("data", (chunk) => {
      if (String(chunk).includes("release")) resolve();
    });
    process.stdin.on("end", resolve);
  });
});
process.stdout.write("released\n", () => process.exit(0));
