#!/usr/bin/env node
// paperclip-sync: the operator's command line for @paperclipai/adapter-utils-native (the
// commands live in cli/). Exit codes: 0 success, 1 the operation failed, 2 bad usage.
import { main } from "../cli/main.js";

process.exitCode = await main(process.argv.slice(2));
