#!/usr/bin/env node
// Drives gsv's MCP server with the official MCP TypeScript SDK (npm
// `@modelcontextprotocol/client`, v2), the counterpart of `tests/mcp/drive.py`.
//
// Started by `tests/e2e_mcp.rs`, which brings up a real gateway and real nodes first
// (`alpha` online with `hello.txt` in its workspace, `gone` known but offline,
// `guarded` with a node guard). It connects either to `/mcp` over Streamable HTTP
// (`--transport http`) or to `gsv mcp` over stdio (`--transport stdio`), in one of the
// SDK's two negotiation modes: `legacy` (the `initialize` handshake, protocol
// 2025-11-25, a session) or `auto` (probes `server/discover` and adopts the
// session-less 2026-07-28 revision when the server offers it). It runs the named checks
// and prints `PASS name (Ns)` or `FAIL name: why` for each; the exit code is 0 only if
// every check passed.
//
// Plain JavaScript on purpose: no build step at test time.

import { execFile, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs, promisify } from "node:util";

import { Client, ProtocolError, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const execFileAsync = promisify(execFile);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

let ARGS;

class CheckFailed extends Error {}

function expect(cond, why) {
  if (!cond) throw new CheckFailed(why);
}

const show = (v) => JSON.stringify(v);

/** Rejects after `ms` with `why`; bounds every wait so a check fails instead of hanging. */
async function within(ms, why, promise) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new CheckFailed(`timed out after ${ms} ms: ${why}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A connected client of the server under test, authenticated with `token`.
 * `elicit` ("accept" / "decline") declares the elicitation capability and answers
 * every question so, recording it in `asked`.
 */
async function connect(token, { elicit, asked } = {}) {
  const c = new Client(
    { name: "gsv-e2e-ts", version: "1" },
    {
      capabilities: elicit ? { elicitation: { form: {} } } : {},
      versionNegotiation: { mode: ARGS.mode },
    },
  );
  if (elicit) {
    // Legacy: a server-to-client `elicitation/create`. 2026-07-28: the SDK fulfils the
    // `input_required` result through this same handler and retries the call.
    c.setRequestHandler("elicitation/create", async (request) => {
      asked.push(request.params.message);
      return elicit === "accept" ? { action: "accept", content: {} } : { action: elicit };
    });
  }
  let transport;
  if (ARGS.transport === "http") {
    const headers = token ? { Authorization: `Bearer ${token}` } : {};
    transport = new StreamableHTTPClientTransport(new URL(ARGS.url), { requestInit: { headers } });
  } else {
    // Like drive.py: nothing of the test's GSV_* settings leaks into the bridge.
    const env = Object.fromEntries(
      Object.entries(process.env).filter(([k, v]) => !k.startsWith("GSV_") && k !== "RUST_LOG" && v !== undefined),
    );
    const args = ["mcp", "--gateway", ARGS.gateway, "--data", ARGS["empty-data"]];
    if (token) args.push("--token", token);
    transport = new StdioClientTransport({ command: ARGS.gsv, args, env });
  }
  try {
    await c.connect(transport, { timeout: 15_000 });
  } catch (e) {
    // A failed connect must not leave a `gsv mcp` child behind.
    await within(5_000, "closing after a failed connect", c.close()).catch(() => {});
    throw e;
  }
  return c;
}

/** Runs `body` with a connected client and closes it afterwards, whatever happens. */
async function withClient(token, opts, body) {
  const c = await connect(token, opts);
  try {
    return await body(c);
  } finally {
    await within(5_000, "closing the client", c.close()).catch(() => {});
  }
}

const textOf = (r) =>
  (r.content ?? [])
    .filter((b) => b.type === "text")
    .map((b) => b.text)
    .join("\n");

/** Every tool, fetched afresh (never from the SDK's response cache). */
async function allTools(c) {
  const { tools } = await c.listTools(undefined, { cacheMode: "refresh" });
  return tools;
}

async function toolNames(c) {
  return new Set((await allTools(c)).map((t) => t.name));
}

/** Awaits `promise`, which must reject with a JSON-RPC error; returns the error. */
async function protocolError(promise, what) {
  try {
    await promise;
  } catch (e) {
    expect(e instanceof ProtocolError, `${what}: not a protocol error: ${e}`);
    return e;
  }
  throw new CheckFailed(`${what} did not fail`);
}

// --- checks -------------------------------------------------------------------------

async function checkList() {
  await withClient(ARGS.token, {}, async (c) => {
    const version = c.getNegotiatedProtocolVersion();
    if (ARGS.mode === "legacy") {
      expect(version === "2025-11-25", `negotiated ${version}`);
      expect(c.getProtocolEra() === "legacy", `era ${c.getProtocolEra()}`);
    } else {
      expect(version === "2026-07-28", `auto mode adopted ${version}`);
      expect(c.getProtocolEra() === "modern", `era ${c.getProtocolEra()}`);
    }
    const tools = new Map((await allTools(c)).map((t) => [t.name, t]));
    const node = ARGS.node;
    for (const name of [`${node}__Read`, `${node}__Bash`, `${node}__Echo`, `${ARGS["offline-node"]}__Read`]) {
      expect(tools.has(name), `${name} not listed: ${show([...tools.keys()].sort())}`);
    }
    const read = tools.get(`${node}__Read`);
    expect((read.description ?? "").startsWith(`[${node}] `), `description ${show(read.description)}`);
    expect(read.inputSchema?.type === "object", `schema ${show(read.inputSchema)}`);
    expect("path" in (read.inputSchema.properties ?? {}), "Read schema has no path");
    expect(read.annotations?.readOnlyHint === true, `Read annotations ${show(read.annotations)}`);
    const a = tools.get(`${node}__Bash`).annotations;
    expect(a?.destructiveHint === true && a.readOnlyHint === false, `Bash annotations ${show(a)}`);
    expect(a.openWorldHint === true && a.idempotentHint === false, `Bash annotations ${show(a)}`);
  });
}

async function checkRead() {
  await withClient(ARGS.token, {}, async (c) => {
    const r = await c.callTool({ name: `${ARGS.node}__Read`, arguments: { path: "hello.txt" } });
    expect(!r.isError, `isError: ${textOf(r)}`);
    expect(r.content[0]?.type === "text" && r.content[0].text === "1\thello world", `content ${show(r.content)}`);
    const sc = r.structuredContent ?? {};
    expect(sc.lines === 1, `structuredContent ${show(sc)}`);
    // The structured result is also there as JSON text, for text-only clients.
    const jsonBlock = r.content.slice(1).some((b) => {
      try {
        return b.type === "text" && show(JSON.parse(b.text)) === show(sc);
      } catch {
        return false;
      }
    });
    expect(jsonBlock, "no JSON text block");
  });
}

async function checkBashProgress() {
  const seen = [];
  await withClient(ARGS.token, {}, async (c) => {
    const command = "for i in 1 2 3; do echo tick$i; sleep 1; done";
    const r = await c.callTool(
      { name: `${ARGS.node}__Bash`, arguments: { command } },
      { onprogress: (p) => seen.push(p), timeout: 20_000 },
    );
    expect(!r.isError, `isError: ${textOf(r)}`);
    expect(textOf(r).includes("tick3"), `output ${show(textOf(r))}`);
  });
  expect(seen.length >= 1, "no progress notification");
  expect(
    seen.some((p) => p.message?.includes("tick")),
    `progress messages carry no output: ${show(seen)}`,
  );
  const values = seen.map((p) => p.progress);
  const increasing = values.every((v, i) => i === 0 || v > values[i - 1]);
  expect(increasing, `progress not increasing: ${show(values)}`);
}

async function checkToolError() {
  await withClient(ARGS.token, {}, async (c) => {
    let r = await c.callTool({ name: `${ARGS.node}__Read`, arguments: { path: "does-not-exist.txt" } });
    expect(r.isError === true, "reading a missing file is not isError");
    const t = textOf(r).toLowerCase();
    expect(t.includes("not found") || t.includes("no such"), `text ${show(textOf(r))}`);
    // Arguments that fail the tool's schema are a tool error too (MCP 2025-11-25).
    r = await c.callTool({ name: `${ARGS.node}__Read`, arguments: { path: 5 } });
    expect(r.isError === true && textOf(r).startsWith("invalid_args:"), `bad args: ${show(textOf(r))}`);
    // An unknown tool is a protocol error.
    const e = await protocolError(c.callTool({ name: `${ARGS.node}__Nope`, arguments: {} }), "calling an unknown tool");
    expect(e.code === -32602, `unknown tool code ${e.code}`);
  });
}

async function checkOffline() {
  await withClient(ARGS.token, {}, async (c) => {
    const off = ARGS["offline-node"];
    const r = await c.callTool({ name: `${off}__Echo`, arguments: { text: "hi" } });
    expect(r.isError === true, "calling an offline node is not isError");
    expect(textOf(r).includes(`node ${off} is offline since`), `text ${show(textOf(r))}`);
  });
}

async function checkHidden() {
  await withClient(ARGS["limited-token"], {}, async (c) => {
    const names = await toolNames(c);
    const node = ARGS.node;
    expect(names.has(`${node}__Read`), `allowed tool missing: ${show([...names].sort())}`);
    expect(!names.has(`${node}__Bash`), "a denied tool is listed");
    expect(
      ![...names].some((n) => n.startsWith(`${ARGS["offline-node"]}__`)),
      "tools outside the allow globs are listed",
    );
    const e = await protocolError(
      c.callTool({ name: `${node}__Bash`, arguments: { command: "true" } }),
      "calling a hidden tool",
    );
    expect(e.code === -32602, `hidden tool code ${e.code}`);
  });
}

async function checkUnauthorized() {
  if (ARGS.transport === "http") {
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} });
    const hdrs = { accept: "application/json, text/event-stream", "content-type": "application/json" };
    const post = (extra) =>
      fetch(ARGS.url, { method: "POST", body, headers: { ...hdrs, ...extra }, signal: AbortSignal.timeout(10_000) });
    let r = await post({});
    expect(r.status === 401, `status ${r.status}`);
    const challenge = r.headers.get("www-authenticate") ?? "";
    expect(challenge.startsWith("Bearer ") && challenge.includes("resource_metadata="), `challenge ${show(challenge)}`);
    const metaUrl = challenge.split('resource_metadata="')[1].split('"')[0];
    const meta = await (await fetch(metaUrl, { signal: AbortSignal.timeout(10_000) })).json();
    expect(meta.resource === ARGS.url, `metadata ${show(meta)}`);
    r = await post({ authorization: "Bearer gsv_agent_000000000000_nope" });
    expect(
      r.status === 401 && (r.headers.get("www-authenticate") ?? "").includes("invalid_token"),
      "bad token not refused",
    );
    r = await post({ authorization: `Bearer ${ARGS.token}`, origin: "https://evil.example" });
    expect(r.status === 403, `foreign Origin: status ${r.status}`);
  }
  let failure;
  try {
    await withClient("gsv_agent_000000000000_nope", {}, (c) => c.listTools());
  } catch (e) {
    failure = e;
  }
  expect(failure !== undefined, "a client with a bad token could list tools");
  // Refused for the token, not for anything else: the SDK's HTTP error names the 401,
  // the bridge's JSON-RPC error the gateway's `unauthorized`.
  const detail = `${failure}`;
  expect(detail.includes("401") || detail.includes("unauthorized"), `error ${show(detail)}`);
}

function pidAlive(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const state = stat.slice(stat.lastIndexOf(")") + 1).trim().split(/\s+/)[0];
    return state !== "Z" && state !== "X";
  } catch {
    return false;
  }
}

async function checkCancel() {
  const pidfile = join(ARGS.workspace, `cancel-ts-${ARGS.transport}-${ARGS.mode}.pid`);
  await withClient(ARGS.token, {}, async (c) => {
    const command = `echo $$ > ${pidfile}; exec sleep 60`;
    // Aborting the request is the SDK's cancellation: `notifications/cancelled` on a
    // 2025 session, closing the request's stream on 2026-07-28 HTTP.
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort("the test cancels"), 2_500);
    try {
      await c.callTool({ name: `${ARGS.node}__Bash`, arguments: { command } }, { signal: abort.signal, timeout: 20_000 });
      throw new CheckFailed("the call finished instead of being cancelled");
    } catch (e) {
      if (e instanceof CheckFailed) throw e;
      // The SDK rejects an aborted request with the abort's reason (not a timeout).
      expect(`${e}`.includes("the test cancels"), `the call failed, not cancelled: ${e}`);
    } finally {
      clearTimeout(timer);
    }
    expect(existsSync(pidfile), "the command never started");
    const pid = Number(readFileSync(pidfile, "utf8").trim());
    const deadline = Date.now() + 10_000;
    while (pidAlive(pid) && Date.now() < deadline) await sleep(100);
    expect(!pidAlive(pid), `process ${pid} still runs after the call was cancelled`);
    // The connection still works.
    const r = await c.callTool({ name: `${ARGS.node}__Echo`, arguments: { text: "after" } });
    expect(textOf(r).startsWith("after"), `echo after cancel: ${show(textOf(r))}`);
  });
}

async function checkElicit() {
  // A token made with --self-confirm: the client's user answers its confirm questions.
  const asked = [];
  const name = `${ARGS.node}__Echo`;
  const token = ARGS["self-confirm-token"];
  await withClient(token, { elicit: "accept", asked }, async (c) => {
    const r = await c.callTool({ name, arguments: { text: "approved" } });
    expect(!r.isError && textOf(r).startsWith("approved"), `accepted call: ${show(textOf(r))}`);
    expect(asked.length > 0 && asked.at(-1).startsWith(`Allow ${name}: `), `question ${show(asked)}`);
  });
  const before = asked.length;
  await withClient(token, { elicit: "decline", asked }, async (c) => {
    const r = await c.callTool({ name, arguments: { text: "refused" } });
    expect(r.isError === true && textOf(r).startsWith("denied:"), `declined call: ${show(textOf(r))}`);
    expect(asked.length > before, "the declining client was not asked");
  });
}

async function gsvCli(...args) {
  try {
    const { stdout } = await execFileAsync(ARGS.gsv, [...args, "--data", ARGS.data], { timeout: 20_000 });
    return stdout;
  } catch (e) {
    throw new CheckFailed(`gsv ${args.join(" ")}: ${e.stderr || e}`);
  }
}

/** Plays the operator: decides the first pending request for node/tool. */
async function decideWhenAsked(node, tool, decision) {
  for (let i = 0; i < 150; i++) {
    let pending = JSON.parse(await gsvCli("approvals", "list", "--json"));
    if (!Array.isArray(pending)) pending = pending.approvals ?? [];
    const mine = pending.filter((p) => p.tool === tool && p.node === node);
    if (mine.length > 0) {
      await gsvCli("approvals", decision, mine[0].id);
      return;
    }
    await sleep(100);
  }
  throw new CheckFailed(`no approval request for ${node}__${tool} appeared`);
}

async function checkNoSelfApproval() {
  // A token without --self-confirm cannot answer its own confirm question, even when its
  // client declares elicitation and accepts everything: an operator decides.
  const asked = [];
  const r = await withClient(ARGS["confirm-token"], { elicit: "accept", asked }, async (c) => {
    const [, result] = await Promise.all([
      decideWhenAsked(ARGS.node, "Echo", "deny"),
      c.callTool({ name: `${ARGS.node}__Echo`, arguments: { text: "self-approved?" } }, { timeout: 20_000 }),
    ]);
    return result;
  });
  expect(asked.length === 0, `the client was asked to approve its own call: ${show(asked)}`);
  expect(r.isError === true && textOf(r).startsWith("denied:"), `call not denied by the operator: ${show(textOf(r))}`);
}

async function checkGuardOperator() {
  // A node guard's approval (--approve-shell) always goes to an operator, never to the
  // caller, whatever the token: full access, or --self-confirm with confirm on the tool.
  const name = `${ARGS.guarded}__Bash`;
  // With --self-confirm the caller answers the policy's question (1 asked); the guard's
  // is the operator's.
  const tokens = [
    ["full", ARGS.token, 0],
    ["self-confirm", ARGS["self-confirm-token"], 1],
  ];
  for (const [label, token, wantAsked] of tokens) {
    const marker = join(ARGS.workspace, `pwned-ts-${ARGS.transport}-${ARGS.mode}-${label}`);
    const asked = [];
    const r = await withClient(token, { elicit: "accept", asked }, async (c) => {
      const [, result] = await Promise.all([
        decideWhenAsked(ARGS.guarded, "Bash", "deny"),
        c.callTool({ name, arguments: { command: `touch ${marker}` } }, { timeout: 20_000 }),
      ]);
      return result;
    });
    expect(asked.length === wantAsked, `${label}: the client was asked ${show(asked)}`);
    expect(
      r.isError === true && textOf(r).startsWith("denied:"),
      `${label}: not denied by the operator: ${show(textOf(r))}`,
    );
    expect(!existsSync(marker), `${label}: the command ran without an operator`);
  }
}

async function checkOperatorQueue() {
  // Without elicitation the call waits for an operator, and the result says so.
  await withClient(ARGS["confirm-token"], {}, async (c) => {
    const [, r] = await Promise.all([
      decideWhenAsked(ARGS.node, "Echo", "approve"),
      c.callTool({ name: `${ARGS.node}__Echo`, arguments: { text: "queued" } }, { timeout: 20_000 }),
    ]);
    expect(!r.isError && textOf(r).startsWith("queued"), `queued call: ${show(textOf(r))}`);
    expect(textOf(r).includes("operator queue"), `the result does not say it waited: ${show(textOf(r))}`);
  });
}

async function checkListChanged() {
  // A node that connects changes the list: the client hears of it.
  const late = `late-ts-${ARGS.transport}-${ARGS.mode}`;
  const token = (await gsvCli("token", "create", "node", late)).trim();
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("GSV_")));
  env.RUST_LOG = "warn";
  const nodeArgs = ["node", "--gateway", ARGS.gateway, "--id", late, "--token", token,
    "--workspace", ARGS.workspace, "--data", join(ARGS.workspace, `${late}-data`)];
  await withClient(ARGS.token, {}, async (c) => {
    let heard;
    const changed = new Promise((resolve) => {
      heard = resolve;
    });
    // Both eras dispatch the notification to this handler: the 2025 session's standalone
    // GET stream, or the 2026-07-28 `subscriptions/listen` stream opened below.
    c.setNotificationHandler("notifications/tools/list_changed", () => heard());
    const names = await toolNames(c);
    expect(!names.has(`${late}__Read`), "late node listed too early");
    let sub;
    let proc;
    try {
      if (ARGS.mode === "legacy") {
        await sleep(500); // let the standalone stream open
      } else {
        sub = await c.listen({ toolsListChanged: true }, { timeout: 10_000 });
        expect(sub.honoredFilter?.toolsListChanged === true, `listen honored ${show(sub.honoredFilter)}`);
      }
      proc = spawn(ARGS.gsv, nodeArgs, { env, stdio: ["ignore", "ignore", "inherit"] });
      await within(15_000, "no tools/list_changed notification", changed);
      const after = await toolNames(c);
      expect(after.has(`${late}__Read`), `late node not listed after the notification: ${show([...after].sort())}`);
    } finally {
      if (sub) await within(5_000, "closing the subscription", sub.close()).catch(() => {});
      if (proc && proc.exitCode === null && proc.signalCode === null) {
        const exited = new Promise((resolve) => proc.once("exit", resolve));
        proc.kill("SIGKILL");
        await within(5_000, "the late node exiting", exited).catch(() => {});
      }
    }
  });
}

const CHECKS = {
  list: checkList,
  read: checkRead,
  "bash-progress": checkBashProgress,
  "tool-error": checkToolError,
  offline: checkOffline,
  hidden: checkHidden,
  unauthorized: checkUnauthorized,
  cancel: checkCancel,
  elicit: checkElicit,
  "no-self-approval": checkNoSelfApproval,
  "guard-operator": checkGuardOperator,
  "operator-queue": checkOperatorQueue,
  "list-changed": checkListChanged,
};

async function main() {
  let failed = 0;
  for (const name of ARGS.checks) {
    const started = performance.now();
    try {
      await within(25_000, name, CHECKS[name]());
      console.log(`PASS ${name} (${((performance.now() - started) / 1000).toFixed(1)}s)`);
    } catch (e) {
      failed++;
      console.log(`FAIL ${name}: ${e}\n${e?.stack ?? ""}`);
    }
  }
  console.log(`${ARGS.checks.length - failed} passed, ${failed} failed`);
  return failed ? 1 : 0;
}

const USAGE = `usage: drive.mjs --transport http|stdio --mode legacy|auto --url URL --gateway URL
  --gsv BIN --data DIR --empty-data DIR --workspace DIR --token T --limited-token T
  --confirm-token T --self-confirm-token T --guarded NODE --node NODE --offline-node NODE
  CHECK... (${Object.keys(CHECKS).join(", ")})`;

function parse() {
  const names = ["transport", "mode", "url", "gateway", "gsv", "data", "empty-data", "workspace", "token",
    "limited-token", "confirm-token", "self-confirm-token", "guarded", "node", "offline-node"];
  let parsed;
  try {
    parsed = parseArgs({
      options: Object.fromEntries(names.map((n) => [n, { type: "string" }])),
      allowPositionals: true,
    });
  } catch (e) {
    throw new Error(`${e.message}\n${USAGE}`);
  }
  const args = parsed.values;
  const missing = names.filter((n) => args[n] === undefined);
  if (missing.length) throw new Error(`missing --${missing.join(", --")}\n${USAGE}`);
  if (!["http", "stdio"].includes(args.transport)) throw new Error(`bad --transport\n${USAGE}`);
  if (!["legacy", "auto"].includes(args.mode)) throw new Error(`bad --mode\n${USAGE}`);
  const unknown = parsed.positionals.filter((c) => !(c in CHECKS));
  if (unknown.length || parsed.positionals.length === 0) throw new Error(`bad checks ${show(unknown)}\n${USAGE}`);
  return { ...args, checks: parsed.positionals };
}

try {
  ARGS = parse();
} catch (e) {
  console.error(e.message);
  process.exit(2);
}
// Exit explicitly: a timed-out check may leave a socket or child behind.
process.exit(await main());
