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
// session-less 2026-07-28 revision when the server offers it). A check that asks for a
// view or a node selection passes `?view=` / `?select=` over HTTP, `gsv mcp --view` /
// `--select` over stdio. It runs the named checks and prints `PASS name (Ns)` or
// `FAIL name: why` for each; the exit code is 0 only if every check passed.
//
// Plain JavaScript on purpose: no build step at test time.

import { execFile, spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, realpathSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
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

/** The /mcp URL with `?view=` and `?select=` when given. */
function mcpUrl({ view, select, tools } = {}) {
  const url = new URL(ARGS.url);
  if (view !== undefined) url.searchParams.set("view", view);
  if (select !== undefined) url.searchParams.set("select", select);
  if (tools !== undefined) url.searchParams.set("tools", tools);
  return url;
}

/**
 * A connected client of the server under test, authenticated with `token`, asking for
 * `view` and `select` (URL query over HTTP, `gsv mcp --view/--select` over stdio).
 * `elicit` ("accept" / "decline") declares the elicitation capability and answers
 * every question so, recording it in `asked` (and calling `onAsk` with it first).
 */
async function connect(token, { elicit, asked, onAsk, view, select, tools } = {}) {
  // Without `view`, the suite's --default-view (none: the token's own choice).
  view = view ?? ARGS["default-view"];
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
      if (onAsk) onAsk(request.params.message);
      return elicit === "accept" ? { action: "accept", content: {} } : { action: elicit };
    });
  }
  let transport;
  if (ARGS.transport === "http") {
    const headers = token ? { Authorization: `Bearer ${token}` } : {};
    transport = new StreamableHTTPClientTransport(mcpUrl({ view, select, tools }), { requestInit: { headers } });
  } else {
    // Like drive.py: nothing of the test's GSV_* settings leaks into the bridge.
    const env = Object.fromEntries(
      Object.entries(process.env).filter(([k, v]) => !k.startsWith("GSV_") && k !== "RUST_LOG" && v !== undefined),
    );
    const args = ["mcp", "--gateway", ARGS.gateway, "--data", ARGS["empty-data"]];
    if (token) args.push("--token", token);
    if (view) args.push("--view", view);
    if (select) args.push("--select", select);
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
    // The node's OS is in the prefix: `[alpha · linux] ...`.
    expect((read.description ?? "").startsWith(`[${node} \u00b7 `), `description ${show(read.description)}`);
    expect(read.inputSchema?.type === "object", `schema ${show(read.inputSchema)}`);
    expect("path" in (read.inputSchema.properties ?? {}), "Read schema has no path");
    expect(read.annotations?.readOnlyHint === true, `Read annotations ${show(read.annotations)}`);
    const a = tools.get(`${node}__Bash`).annotations;
    expect(a?.destructiveHint === true && a.readOnlyHint === false, `Bash annotations ${show(a)}`);
    expect(a.openWorldHint === true && a.idempotentHint === false, `Bash annotations ${show(a)}`);
  });
  // The default URL (auto): each node lists its reference tools and every fleet tool;
  // the rest are described by fleet_tools and called by name.
  await withClient(ARGS.token, { view: "auto" }, async (c) => {
    const tools = await toolNames(c);
    const node = ARGS.node;
    for (const name of [`${node}__Read`, `${node}__Bash`, `${ARGS["offline-node"]}__Read`, "fleet_tools", "fleet_call"]) {
      expect(tools.has(name), `${name} not listed by default: ${show([...tools].sort())}`);
    }
    expect(!tools.has(`${node}__Echo`) && !tools.has(`${node}__git_log`), `not the reference set: ${show([...tools].sort())}`);
    const described = await c.callTool({ name: "fleet_tools", arguments: { node, tools: ["Echo"] } });
    expect(show((described.structuredContent?.tools ?? []).map((d) => d.name)) === show(["Echo"]), `fleet_tools Echo: ${textOf(described)}`);
    const echoed = await c.callTool({ name: `${node}__Echo`, arguments: { text: "unlisted" } });
    expect(!echoed.isError && textOf(echoed).startsWith("unlisted"), `an unlisted tool called by name: ${show(textOf(echoed))}`);
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

async function checkElicitPlan() {
  // The user's question names the file the node resolved the agent's path to (a
  // symlink followed), and the answer holds only for that file: the link re-pointed
  // while the user reads changes nothing. Asked during the call (legacy), the approved
  // call goes to the file the question named; asked before it (2026-07-28's
  // input_required round), the retry finds the path resolving elsewhere and waits for
  // an operator (who denies it here).
  const tag = `plan-ts-${ARGS.transport}-${ARGS.mode}`;
  const [first, second] = ["a", "b"].map((n) => join(ARGS.workspace, `${tag}-${n}`));
  const link = join(ARGS.workspace, `${tag}-link`);
  mkdirSync(first);
  mkdirSync(second);
  symlinkSync(first, link);
  const asked = [];
  const onAsk = () => {
    unlinkSync(link);
    symlinkSync(second, link);
  };
  const legacy = ARGS.mode === "legacy";
  const r = await withClient(ARGS["self-confirm-token"], { elicit: "accept", asked, onAsk }, async (c) => {
    const call = c.callTool({ name: `${ARGS.node}__Write`, arguments: { path: `${tag}-link/f.txt`, content: "x" } }, { timeout: 20_000 });
    if (legacy) return call;
    const [, result] = await Promise.all([decideWhenAsked(ARGS.node, "Write", "deny"), call]);
    return result;
  });
  const shown = join(realpathSync(first), "f.txt");
  expect(
    asked.length === 1 && asked[0].includes(`"${shown}"`) && asked[0].includes("nothing there yet"),
    `the question names the resolved file ${shown}: ${show(asked)}`,
  );
  expect(!existsSync(join(second, "f.txt")), "written through the re-pointed link");
  if (legacy) {
    expect(!r.isError && existsSync(shown), `the approved file was not written: ${show(textOf(r))}`);
  } else {
    expect(
      r.isError === true && textOf(r).startsWith("denied:"),
      `a retry whose path resolves elsewhere was not left to the operator: ${show(textOf(r))}`,
    );
    expect(!existsSync(shown), "the retry wrote although the operator denied it");
  }
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

/**
 * Connects a node `late` while `c` listens for `method` (a `list_changed` notification:
 * on a 2025 session's standalone GET stream, or on 2026-07-28 through
 * `subscriptions/listen` with `filterKey`), waits for it, then runs `after`. The node is
 * killed at the end, whatever happens.
 */
async function whenANodeJoins(c, late, method, filterKey, after) {
  const token = (await gsvCli("token", "create", "node", late)).trim();
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("GSV_")));
  env.RUST_LOG = "warn";
  const nodeArgs = ["node", "--gateway", ARGS.gateway, "--id", late, "--token", token,
    "--workspace", ARGS.workspace, "--data", join(ARGS.workspace, `${late}-data`)];
  let heard;
  const changed = new Promise((resolve) => {
    heard = resolve;
  });
  // Both eras dispatch the notification to this handler: the 2025 session's standalone
  // GET stream, or the 2026-07-28 `subscriptions/listen` stream opened below.
  c.setNotificationHandler(method, () => heard());
  let sub;
  let proc;
  try {
    if (ARGS.mode === "legacy") {
      await sleep(500); // let the standalone stream open
    } else {
      sub = await c.listen({ [filterKey]: true }, { timeout: 10_000 });
      expect(sub.honoredFilter?.[filterKey] === true, `listen honored ${show(sub.honoredFilter)}`);
    }
    proc = spawn(ARGS.gsv, nodeArgs, { env, stdio: ["ignore", "ignore", "inherit"] });
    await within(15_000, `no ${method} notification`, changed);
    await after();
  } finally {
    if (sub) await within(5_000, "closing the subscription", sub.close()).catch(() => {});
    if (proc && proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((resolve) => proc.once("exit", resolve));
      proc.kill("SIGKILL");
      await within(5_000, "the late node exiting", exited).catch(() => {});
    }
  }
}

async function checkListChanged() {
  // A node that connects changes the list: the client hears of it.
  const late = `late-ts-${ARGS.transport}-${ARGS.mode}`;
  // Flat asked for: the late node grows the fleet, and a session-less client's `auto`
  // is decided on each request.
  await withClient(ARGS.token, { view: "flat" }, async (c) => {
    const names = await toolNames(c);
    expect(!names.has(`${late}__Read`), "late node listed too early");
    await whenANodeJoins(c, late, "notifications/tools/list_changed", "toolsListChanged", async () => {
      const after = await toolNames(c);
      expect(after.has(`${late}__Read`), `late node not listed after the notification: ${show([...after].sort())}`);
    });
  });
}

// --- fleet view, views and selection ----------------------------------------------

/** The gateway tools no node offers, listed in both views. */
const GATEWAY_TOOLS = ["fleet_run", "fleet_jobs", "fleet_job", "fleet_copy"];
/** The fleet view's tools that the flat view does not list. */
const FLEET_ONLY = ["fleet_call", "fleet_nodes", "fleet_tools", "fleet_use", "fleet_release"];
const FLEET_TOOLS = [...FLEET_ONLY, ...GATEWAY_TOOLS];
const REFERENCE_TOOLS = ["Bash", "Process", "Read", "Write", "Edit", "Glob", "Grep"];

/** The flat listing's names without the gateway tools (which it must list). */
async function nodeToolNames(c) {
  const names = await toolNames(c);
  expect(GATEWAY_TOOLS.every((n) => names.has(n)), `the flat view does not list the gateway tools: ${show([...names])}`);
  for (const n of FLEET_TOOLS) names.delete(n);
  return names;
}

/** What the default listing names on each node (gateway/src/mcp/listed.rs). */
const REFERENCE = ["Bash", "Process", "Read", "Write", "Edit", "Glob", "Grep"];

/** Whether the set `names` is exactly the fleet view's six tools. */
const isFleetView = (names) => names.size === FLEET_TOOLS.length && FLEET_TOOLS.every((n) => names.has(n));

const fleetCall = (c, node, tool, args, options) =>
  c.callTool({ name: "fleet_call", arguments: { node, tool, args } }, options);

/** Every node `fleet_nodes` gives with `args`, page after page. */
async function allNodes(c, args = {}) {
  const nodes = [];
  let cursor;
  for (let i = 0; i < 100; i++) {
    const r = await c.callTool({ name: "fleet_nodes", arguments: { ...args, ...(cursor ? { cursor } : {}) } });
    expect(!r.isError, `fleet_nodes: ${textOf(r)}`);
    const page = r.structuredContent ?? {};
    nodes.push(...(page.nodes ?? []));
    cursor = page.nextCursor;
    if (!cursor) return nodes;
  }
  throw new CheckFailed("fleet_nodes never ended");
}

/** Every resource listed, fetched afresh. */
async function resourceUris(c) {
  const { resources } = await c.listResources(undefined, { cacheMode: "refresh" });
  return new Set(resources.map((r) => r.uri));
}

/** The JSON of the resource `uri`'s first content, read afresh. */
async function readJson(c, uri) {
  const r = await c.readResource({ uri }, { cacheMode: "bypass" });
  return JSON.parse(r.contents[0].text);
}

const sameSet = (set, list) => set.size === list.length && list.every((x) => set.has(x));

async function checkFleetList() {
  // The fleet view lists six gateway tools, small, whatever the fleet.
  await withClient(ARGS.token, { view: "fleet" }, async (c) => {
    const tools = await allTools(c);
    const names = tools.map((t) => t.name);
    expect(names.length === FLEET_TOOLS.length && isFleetView(new Set(names)), `fleet listing ${show(names)}`);
    const size = Buffer.byteLength(JSON.stringify(tools));
    expect(size <= 6 * 1024, `the fleet listing is ${size} bytes`);
    const desc = Object.fromEntries(tools.map((t) => [t.name, t.description ?? ""]));
    expect(desc.fleet_nodes.includes("select") && desc.fleet_nodes.includes("fact."), "fleet_nodes does not explain select");
  });
}

async function checkFleetNodes() {
  await withClient(ARGS.token, { view: "fleet" }, async (c) => {
    const nodes = new Map((await allNodes(c)).map((n) => [n.id, n]));
    for (const n of [ARGS.node, ARGS["offline-node"], ARGS.guarded]) {
      expect(nodes.has(n), `${n} not in fleet_nodes: ${show([...nodes.keys()].sort())}`);
    }
    const alpha = nodes.get(ARGS.node);
    expect(alpha.online === true && !nodes.get(ARGS["offline-node"]).online, `online flags ${show([...nodes.values()])}`);
    expect(["Read", "Bash", "Echo"].every((t) => alpha.tools.includes(t)), `alpha tools ${show(alpha.tools)}`);
    expect(alpha.os === "linux" && "labels" in alpha, `alpha card ${show(alpha)}`);
    const picked = await allNodes(c, { select: `id~${ARGS.node}` });
    expect(show(picked.map((n) => n.id)) === show([ARGS.node]), `select id~${ARGS.node}: ${show(picked)}`);
    let r = await c.callTool({ name: "fleet_nodes", arguments: { select: "a,,b" } });
    expect(r.isError === true && textOf(r).startsWith("invalid_args:"), `bad select: ${show(textOf(r))}`);
    r = await c.callTool({ name: "fleet_nodes", arguments: { cursor: "nonsense" } });
    expect(r.isError === true && textOf(r).includes("cursor"), `bad cursor: ${show(textOf(r))}`);
  });
}

async function checkFleetTools() {
  await withClient(ARGS.token, { view: "fleet" }, async (c) => {
    let r = await c.callTool({ name: "fleet_tools", arguments: { node: ARGS.node, tools: ["Read"] } });
    expect(!r.isError, `fleet_tools: ${textOf(r)}`);
    const defs = r.structuredContent?.tools ?? [];
    expect(show(defs.map((d) => d.name)) === show(["Read"]), `definitions ${show(defs)}`);
    expect("path" in (defs[0].inputSchema?.properties ?? {}), `Read schema ${show(defs[0])}`);
    expect(defs[0].annotations?.readOnlyHint === true, `Read annotations ${show(defs[0])}`);
    r = await c.callTool({ name: "fleet_tools", arguments: { node: ARGS.node } });
    const names = new Set((r.structuredContent?.tools ?? []).map((d) => d.name));
    expect(["Read", "Bash", "Echo"].every((t) => names.has(t)), `all of alpha's tools: ${show([...names])}`);
  });
}

async function auditCalls() {
  const out = await gsvCli("audit", "tail", "-n", "50", "--json");
  const rows = out.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
  return rows.filter((r) => r.kind === "call");
}

async function checkFleetCall() {
  // fleet_call is the routed call of NODE__TOOL: same result, same audit row.
  const marker = `fleet-call-ts-${ARGS.transport}-${ARGS.mode}`;
  writeFileSync(join(ARGS.workspace, `${marker}.txt`), "same\n");
  const args = { path: `${marker}.txt` };
  const flat = await withClient(ARGS.token, { view: "flat" }, (c) =>
    c.callTool({ name: `${ARGS.node}__Read`, arguments: args }),
  );
  const outcome = (r) => show([r.content, r.structuredContent, r.isError ?? false]);
  await withClient(ARGS.token, { view: "fleet" }, async (c) => {
    const fleet = await fleetCall(c, ARGS.node, "Read", args);
    expect(outcome(fleet) === outcome(flat), `fleet ${show(fleet)} != flat ${show(flat)}`);
    expect(textOf(fleet).startsWith("1\tsame"), `fleet_call Read: ${show(textOf(fleet))}`);
    // Names are checked by gsv's rules; unknown tools are the flat view's error.
    const r = await c.callTool({ name: "fleet_call", arguments: { node: "Bad_Node", tool: "Read" } });
    expect(r.isError === true && textOf(r).startsWith("invalid_args:"), `bad node id: ${show(textOf(r))}`);
    let e = await protocolError(fleetCall(c, ARGS.node, "Nope", {}), "fleet_call of an unknown tool");
    expect(e.code === -32602 && e.message.includes(`${ARGS.node}__Nope`), `unknown tool: ${e}`);
    // A namespaced name works in the fleet view too, though it lists none: the same
    // routed call.
    const direct = await c.callTool({ name: `${ARGS.node}__Read`, arguments: args });
    expect(outcome(direct) === outcome(flat), `direct ${show(direct)} != flat ${show(flat)}`);
    e = await protocolError(c.callTool({ name: `${ARGS.node}__Nope`, arguments: {} }), "an unknown namespaced tool");
    expect(e.code === -32602 && e.message.includes(`${ARGS.node}__Nope`), `unknown namespaced tool: ${e}`);
    // A whole-number count with a fraction is rounded down, not refused.
    const odd = await c.callTool({ name: "fleet_call", arguments: { node: ARGS.node, tool: "Read", args, timeoutMs: 1500.5 } });
    expect(!odd.isError && textOf(odd).startsWith("1\tsame"), `fleet_call timeoutMs 1500.5: ${show(textOf(odd))}`);
  });
  let mine = [];
  for (let i = 0; i < 50; i++) {
    const rows = await auditCalls();
    mine = rows.filter((r) => r.node === ARGS.node && r.tool === "Read" && r.outcome === "ok");
    if (mine.length >= 3) break;
    await sleep(100);
  }
  expect(mine.length >= 3, `audit rows of the three calls: ${show(mine)}`);
  const keys = ["kind", "actor", "node", "tool", "argsHash", "outcome"];
  const [a, b, d] = mine.slice(-3).map((r) => show(keys.map((k) => r[k] ?? null)));
  expect(a === b && b === d, `audit rows differ: flat ${a} fleet ${b} direct ${d}`);
}

async function checkFleetProgress() {
  const seen = [];
  await withClient(ARGS.token, { view: "fleet" }, async (c) => {
    const command = "for i in 1 2 3; do echo tick$i; sleep 1; done";
    const r = await fleetCall(c, ARGS.node, "Bash", { command }, { onprogress: (p) => seen.push(p), timeout: 20_000 });
    expect(!r.isError && textOf(r).includes("tick3"), `fleet_call Bash: ${show(textOf(r))}`);
  });
  expect(
    seen.some((p) => p.message?.includes("tick")),
    `no progress with output: ${show(seen)}`,
  );
}

/** Starts `command` (which writes its pid to `pidfile`) with `call`, aborts the call
 * after 2.5 s, and checks that the process ends. */
async function cancelled(pidfile, call) {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort("the test cancels"), 2_500);
  try {
    await call({ signal: abort.signal, timeout: 20_000 });
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
}

async function checkFleetCancel() {
  const pidfile = join(ARGS.workspace, `fleet-cancel-ts-${ARGS.transport}-${ARGS.mode}.pid`);
  await withClient(ARGS.token, { view: "fleet" }, async (c) => {
    const command = `echo $$ > ${pidfile}; exec sleep 60`;
    await cancelled(pidfile, (options) => fleetCall(c, ARGS.node, "Bash", { command }, options));
    const r = await fleetCall(c, ARGS.node, "Echo", { text: "after" });
    expect(textOf(r).startsWith("after"), `echo after cancel: ${show(textOf(r))}`);
  });
}

async function checkFleetElicit() {
  // A --self-confirm token's confirm glob, through fleet_call: the user is asked about
  // the namespaced call.
  const asked = [];
  const token = ARGS["self-confirm-token"];
  await withClient(token, { view: "fleet", elicit: "accept", asked }, async (c) => {
    const r = await fleetCall(c, ARGS.node, "Echo", { text: "fleet-approved" });
    expect(!r.isError && textOf(r).startsWith("fleet-approved"), `accepted: ${show(textOf(r))}`);
    expect(asked.length > 0 && asked.at(-1).startsWith(`Allow ${ARGS.node}__Echo: `), `question ${show(asked)}`);
  });
  await withClient(token, { view: "fleet", elicit: "decline", asked }, async (c) => {
    const r = await fleetCall(c, ARGS.node, "Echo", { text: "fleet-refused" });
    expect(r.isError === true && textOf(r).startsWith("denied:"), `declined: ${show(textOf(r))}`);
  });
}

async function checkFleetOperatorQueue() {
  await withClient(ARGS["confirm-token"], { view: "fleet" }, async (c) => {
    const [, r] = await Promise.all([
      decideWhenAsked(ARGS.node, "Echo", "approve"),
      fleetCall(c, ARGS.node, "Echo", { text: "fleet-queued" }, { timeout: 20_000 }),
    ]);
    expect(!r.isError && textOf(r).startsWith("fleet-queued"), `queued: ${show(textOf(r))}`);
    expect(textOf(r).includes("operator queue"), `the result does not say it waited: ${show(textOf(r))}`);
  });
}

async function checkFleetGuard() {
  // A node guard's approval through fleet_call goes to an operator, never the caller.
  const marker = join(ARGS.workspace, `fleet-pwned-ts-${ARGS.transport}-${ARGS.mode}`);
  const asked = [];
  const r = await withClient(ARGS.token, { view: "fleet", elicit: "accept", asked }, async (c) => {
    const [, result] = await Promise.all([
      decideWhenAsked(ARGS.guarded, "Bash", "deny"),
      fleetCall(c, ARGS.guarded, "Bash", { command: `touch ${marker}` }, { timeout: 20_000 }),
    ]);
    return result;
  });
  expect(asked.length === 0, `the client was asked: ${show(asked)}`);
  expect(r.isError === true && textOf(r).startsWith("denied:"), `not denied by the operator: ${show(textOf(r))}`);
  expect(!existsSync(marker), "the command ran without an operator");
}

async function checkSelect() {
  // ?select= narrows the session to some nodes, shown flat; a node outside it is
  // unknown, exactly like a tool that does not exist.
  const sel = `id~${ARGS.node}`;
  await withClient(ARGS.token, { select: sel }, async (c) => {
    const names = [...(await nodeToolNames(c))];
    expect(names.length > 0 && names.every((n) => n.startsWith(`${ARGS.node}__`)), `select ${sel}: ${show(names.sort())}`);
    const r = await c.callTool({ name: `${ARGS.node}__Echo`, arguments: { text: "picked" } });
    expect(textOf(r).startsWith("picked"), `call inside the selection: ${show(textOf(r))}`);
    const outside = await protocolError(
      c.callTool({ name: `${ARGS.guarded}__Echo`, arguments: { text: "x" } }),
      "a call outside the selection",
    );
    const missing = await protocolError(
      c.callTool({ name: "nosuchnode__Echo", arguments: { text: "x" } }),
      "a call of a missing node",
    );
    expect(outside.code === -32602 && missing.code === -32602, `codes ${outside.code} ${missing.code}`);
    expect(
      outside.message.replaceAll(ARGS.guarded, "N") === missing.message.replaceAll("nosuchnode", "N"),
      `outside the selection ${show(outside.message)} vs missing ${show(missing.message)}`,
    );
    const uris = await resourceUris(c);
    expect(sameSet(uris, ["gsv://nodes", `gsv://nodes/${ARGS.node}`]), `resources ${show([...uris])}`);
  });
  await withClient(ARGS.token, { view: "fleet", select: sel }, async (c) => {
    const ids = (await allNodes(c)).map((n) => n.id);
    expect(show(ids) === show([ARGS.node]), `fleet_nodes outside the selection: ${show(ids)}`);
    const e = await protocolError(fleetCall(c, ARGS.guarded, "Echo", { text: "x" }), "fleet_call outside the selection");
    expect(e.code === -32602, `fleet_call outside the selection: ${e}`);
  });
  if (ARGS.transport === "http") {
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} });
    const headers = {
      accept: "application/json, text/event-stream",
      "content-type": "application/json",
      authorization: `Bearer ${ARGS.token}`,
    };
    for (const [url, what] of [[mcpUrl({ select: "a,,b" }), "select"], [mcpUrl({ view: "tree" }), "view"]]) {
      const r = await fetch(url, { method: "POST", body, headers, signal: AbortSignal.timeout(10_000) });
      const text = await r.text();
      expect(r.status === 400, `bad ?${what}=: status ${r.status}`);
      let err = {};
      try {
        err = JSON.parse(text).error ?? {};
      } catch {
        // checked below
      }
      expect(err.code === -32602 && `${err.message}`.includes(`?${what}=`), `bad ?${what}=: ${text}`);
    }
  }
}

async function checkViewOverride() {
  // The token's --mcp-view is its default; ?view= (gsv mcp --view) overrides it.
  await withClient(ARGS["fleet-token"], {}, async (c) => {
    expect(isFleetView(await toolNames(c)), "a --mcp-view fleet token did not get the fleet view");
  });
  await withClient(ARGS["fleet-token"], { view: "flat" }, async (c) => {
    const names = await toolNames(c);
    expect(
      names.has(`${ARGS.node}__Read`) && !FLEET_ONLY.some((n) => names.has(n)) && GATEWAY_TOOLS.every((n) => names.has(n)),
      `?view=flat: ${show([...names].sort())}`,
    );
  });
  await withClient(ARGS.token, { view: "fleet" }, async (c) => {
    expect(isFleetView(await toolNames(c)), "?view=fleet did not give the fleet view");
  });
}

async function checkAutoThreshold() {
  // auto: each node's reference tools and every fleet tool, flat, while the listing is
  // small; weighed by bytes, not by a count: every tool of this fleet (`?tools=all`) is
  // past it, so the fleet view, while one token's single tool stays flat.
  await withClient(ARGS.token, {}, async (c) => {
    const tools = await allTools(c);
    const listed = new Set(tools.map((t) => t.name));
    const nodeTools = [...listed].filter((n) => n.includes("__"));
    expect(FLEET_TOOLS.every((n) => listed.has(n)), `the default listing lacks fleet tools: ${show([...listed].sort())}`);
    expect(nodeTools.every((n) => REFERENCE.includes(n.split("__")[1])), `not the reference set: ${show(nodeTools.sort())}`);
    expect(listed.has(`${ARGS.node}__Bash`) && listed.has(`${ARGS["offline-node"]}__Read`), `nodes listed: ${show(nodeTools.sort())}`);
    const size = JSON.stringify(tools).length;
    expect(size <= 48 * 1024, `the default listing is ${size} bytes`);
  });
  const many = await withClient(ARGS.token, { view: "flat" }, async (c) => (await nodeToolNames(c)).size);
  await withClient(ARGS.token, { tools: "all" }, async (c) => {
    expect(isFleetView(await toolNames(c)), `auto with all ${many} tools is not the fleet view`);
    const r = await c.callTool({ name: `${ARGS.node}__Echo`, arguments: { text: "by name" } });
    expect(textOf(r).startsWith("by name"), `a namespaced call in the fleet view: ${show(textOf(r))}`);
  });
  await withClient(ARGS["only-read-token"], { tools: "all" }, async (c) => {
    const names = await toolNames(c);
    const want = new Set([`${ARGS.node}__Read`, ...GATEWAY_TOOLS]);
    expect(names.size === want.size && [...want].every((n) => names.has(n)), `auto with one tool is not flat: ${show([...names].sort())}`);
  });
}

async function checkByName() {
  // A fleet of fifty machines over the default URL: the listing is the fleet view
  // (seven tools, whatever the fleet), and each machine's tools are called by their
  // namespaced names all the same, the first, the last and one in between.
  await withClient(ARGS.token, { view: "auto" }, async (c) => {
    expect(isFleetView(await toolNames(c)), "fifty machines are not the fleet view");
    const nodes = await allNodes(c);
    expect(nodes.length >= 50, `${nodes.length} nodes`);
    const online = nodes.filter((n) => n.online).map((n) => n.id).sort();
    for (const node of [online[0], online[Math.floor(online.length / 2)], online.at(-1)]) {
      const r = await c.callTool({ name: `${node}__Bash`, arguments: { command: `echo by-name-${node}` } });
      expect(!r.isError && textOf(r).includes(`by-name-${node}`), `${node}__Bash: ${show(textOf(r))}`);
    }
    const r = await fleetCall(c, online.at(-1), "Read", { path: "hello.txt" });
    expect(!r.isError && textOf(r).startsWith("1\thello world"), `fleet_call Read: ${show(textOf(r))}`);
    await checkFleetUse(c);
  });
}

async function checkByNameSmall() {
  // A few machines over the default URL: each one's reference tools are listed by
  // namespace beside the fleet tools, `{node}__Bash` runs on every one, a tool the
  // listing leaves out (`Echo`) is called by name all the same, and fleet_use lists it.
  await withClient(ARGS.token, {}, async (c) => {
    if (ARGS.mode === "legacy") await sleep(500); // let the standalone stream open
    const listed = await toolNames(c);
    const online = (await allNodes(c)).filter((n) => n.online && n.id !== ARGS.guarded).map((n) => n.id).sort();
    expect(FLEET_TOOLS.every((n) => listed.has(n)) && online.length >= 1, `default listing ${show([...listed].sort())}`);
    if ((await allNodes(c)).length === 1) {
      const only = new Set([...REFERENCE_TOOLS.map((t) => `${online[0]}__${t}`), ...FLEET_TOOLS]);
      const same = only.size === listed.size && [...only].every((n) => listed.has(n));
      expect(same, `one machine's default listing ${show([...listed].sort())}`);
    }
    for (const node of online) {
      const reference = REFERENCE_TOOLS.every((t) => listed.has(`${node}__${t}`));
      expect(reference && !listed.has(`${node}__Echo`), `${node}: ${show([...listed].sort())}`);
      const r = await c.callTool({ name: `${node}__Bash`, arguments: { command: `echo small-${node}` } });
      expect(!r.isError && textOf(r).includes(`small-${node}`), `${node}__Bash: ${show(textOf(r))}`);
      const e = await c.callTool({ name: `${node}__Echo`, arguments: { text: `unlisted-${node}` } });
      expect(!e.isError && textOf(e).startsWith(`unlisted-${node}`), `${node}__Echo: ${show(textOf(e))}`);
    }
    const last = online.at(-1);
    const got = await useHeard(c, "fleet_use", { nodes: [last] });
    expect((got.tools ?? []).includes(`${last}__Echo`), `fleet_use ${last}: ${show(got)}`);
    expect((await toolNames(c)).has(`${last}__Echo`), `${last}__Echo not listed after fleet_use`);
    await useHeard(c, "fleet_release", { all: true });
    const after = await toolNames(c);
    expect(after.size === listed.size && [...listed].every((n) => after.has(n)), "the listing after fleet_release is not the default one");
  });
}

/**
 * Calls fleet_use / fleet_release and waits for `notifications/tools/list_changed` (a
 * 2025 session's standalone stream, or a 2026-07-28 `subscriptions/listen` stream).
 */
async function useHeard(c, name, args) {
  let heard;
  const changed = new Promise((resolve) => {
    heard = resolve;
  });
  c.setNotificationHandler("notifications/tools/list_changed", () => heard());
  let sub;
  try {
    if (ARGS.mode !== "legacy") {
      sub = await c.listen({ toolsListChanged: true }, { timeout: 10_000 });
    }
    const r = await c.callTool({ name, arguments: args });
    expect(!r.isError, `${name} ${show(args)}: ${show(textOf(r))}`);
    await within(15_000, `no list_changed after ${name}`, changed);
    return r.structuredContent ?? {};
  } finally {
    if (sub) await within(5_000, "closing the subscription", sub.close()).catch(() => {});
  }
}

async function checkFleetUse(c) {
  // fleet_use / fleet_release at fifty machines: named and selected nodes enter the
  // listing with all their tools, the cap refuses a selector of the whole fleet (and
  // changes nothing), and release brings back the nine tools.
  if (ARGS.mode === "legacy") await sleep(500); // let the standalone stream open
  expect(isFleetView(await toolNames(c)), "the fifty-machine listing before fleet_use");
  let got = await useHeard(c, "fleet_use", { nodes: ["m07"] });
  expect(show(got.inUse) === show(["m07"]) && show(got.added) === show(["m07"]), `fleet_use m07: ${show(got)}`);
  const listed = await toolNames(c);
  const m07 = [...listed].filter((n) => n.startsWith("m07__")).sort();
  for (const t of ["Bash", "Read", "git_log", "net_diagnose"]) {
    expect(m07.includes(`m07__${t}`), `m07's tools lack ${t}: ${show(m07)}`);
  }
  expect(listed.size === FLEET_TOOLS.length + m07.length, `listing ${show([...listed].sort())}`);
  expect(show([...(got.tools ?? [])].sort()) === show(m07), `fleet_use tools ${show(got.tools)}`);
  const r = await c.callTool({ name: "m07__Bash", arguments: { command: "echo in-use" } });
  expect(!r.isError && textOf(r).includes("in-use"), `m07__Bash in use: ${show(textOf(r))}`);
  const twenties = [...Array(10).keys()].map((i) => `m2${i}`);
  got = await useHeard(c, "fleet_use", { select: "id~m2?" });
  expect(show(got.inUse) === show(["m07", ...twenties]) && show(got.added) === show(twenties), `fleet_use id~m2?: ${show(got)}`);
  const over = await c.callTool({ name: "fleet_use", arguments: { select: "id~m*" } });
  expect(over.isError && textOf(over).includes("too_large") && textOf(over).includes("16"), `over the cap: ${show(textOf(over))}`);
  const inUse = new Set([...(await toolNames(c))].filter((n) => n.includes("__")).map((n) => n.split("__")[0]));
  expect(show([...inUse].sort()) === show(["m07", ...twenties]), `a refused fleet_use changed the listing: ${show([...inUse])}`);
  const missing = await protocolError(c.callTool({ name: "fleet_use", arguments: { nodes: ["nosuchnode"] } }), "fleet_use nosuchnode");
  expect(missing.message.includes("nosuchnode"), `fleet_use of a missing node: ${show(missing.message)}`);
  got = await useHeard(c, "fleet_release", { nodes: ["m07"] });
  expect(show(got.released) === show(["m07"]) && show(got.inUse) === show(twenties), `fleet_release m07: ${show(got)}`);
  got = await useHeard(c, "fleet_release", { all: true });
  expect(show(got.inUse) === show([]) && show(got.released) === show(twenties), `fleet_release all: ${show(got)}`);
  expect(isFleetView(await toolNames(c)), "the listing after releasing all");
}

async function checkNoLeak() {
  // A token that may call only NODE__Read sees only that node and only Read, in the
  // flat view, the fleet view and the resources; what it may not see answers exactly
  // like what does not exist.
  const token = ARGS["only-read-token"];
  const node = ARGS.node;
  const guarded = ARGS.guarded;
  const hidden = await withClient(token, { view: "flat" }, async (c) => {
    const names = await toolNames(c);
    expect(sameSet(names, [`${node}__Read`, ...GATEWAY_TOOLS]), `flat listing ${show([...names])}`);
    const hidden = await protocolError(c.callTool({ name: `${node}__Bash`, arguments: { command: "true" } }), "Bash");
    const missing = await protocolError(c.callTool({ name: `${node}__Nope`, arguments: {} }), "Nope");
    const other = await protocolError(c.callTool({ name: `${guarded}__Read`, arguments: { path: "x" } }), "other node");
    for (const [e, n] of [[hidden, "Bash"], [missing, "Nope"]]) expect(e.code === -32602, `${n}: code ${e.code}`);
    expect(
      hidden.message.replaceAll("Bash", "X") === missing.message.replaceAll("Nope", "X"),
      `${show(hidden.message)} vs ${show(missing.message)}`,
    );
    expect(
      other.message.replaceAll(`${guarded}__Read`, "X") === missing.message.replaceAll(`${node}__Nope`, "X"),
      `${show(other.message)} vs ${show(missing.message)}`,
    );
    const uris = await resourceUris(c);
    expect(sameSet(uris, ["gsv://nodes", `gsv://nodes/${node}`]), `resources ${show([...uris])}`);
    const whole = await readJson(c, "gsv://nodes");
    expect(
      show(whole.nodes.map((n) => [n.id, n.tools])) === show([[node, ["Read"]]]),
      `gsv://nodes: ${show(whole)}`,
    );
    const one = await readJson(c, `gsv://nodes/${node}`);
    expect(show(one.tools) === show(["Read"]), `gsv://nodes/${node}: ${show(one)}`);
    const e1 = await protocolError(c.readResource({ uri: `gsv://nodes/${guarded}` }, { cacheMode: "bypass" }), "unseen");
    const e2 = await protocolError(c.readResource({ uri: "gsv://nodes/nosuchnode" }, { cacheMode: "bypass" }), "missing");
    expect(
      e1.code === e2.code && e1.message.replaceAll(guarded, "X") === e2.message.replaceAll("nosuchnode", "X"),
      `resource of an unseen node ${show(e1.message)} vs missing ${show(e2.message)}`,
    );
    return hidden;
  });
  await withClient(token, { view: "fleet" }, async (c) => {
    const nodes = await allNodes(c);
    expect(show(nodes.map((n) => [n.id, n.tools])) === show([[node, ["Read"]]]), `fleet_nodes: ${show(nodes)}`);
    const r = await c.callTool({ name: "fleet_tools", arguments: { node } });
    const defs = r.structuredContent?.tools ?? [];
    expect(show(defs.map((d) => d.name)) === show(["Read"]), `fleet_tools: ${textOf(r)}`);
    const fleetTools = (args, what) => protocolError(c.callTool({ name: "fleet_tools", arguments: args }), what);
    const tHidden = await fleetTools({ node, tools: ["Bash"] }, "fleet_tools Bash");
    const tMissing = await fleetTools({ node, tools: ["Nope"] }, "fleet_tools Nope");
    expect(
      tHidden.message.replaceAll("Bash", "X") === tMissing.message.replaceAll("Nope", "X"),
      `${show(tHidden.message)} vs ${show(tMissing.message)}`,
    );
    const nHidden = await fleetTools({ node: guarded }, "fleet_tools of an unseen node");
    const nMissing = await fleetTools({ node: "nosuchnode" }, "fleet_tools of a missing node");
    expect(
      nHidden.message.replaceAll(guarded, "X") === nMissing.message.replaceAll("nosuchnode", "X"),
      `${show(nHidden.message)} vs ${show(nMissing.message)}`,
    );
    const cHidden = await protocolError(fleetCall(c, node, "Bash", { command: "true" }), "fleet_call Bash");
    expect(
      cHidden.message === hidden.message,
      `fleet_call of a hidden tool ${show(cHidden.message)} vs flat ${show(hidden.message)}`,
    );
    const ok = await fleetCall(c, node, "Read", { path: "hello.txt" });
    expect(!ok.isError && textOf(ok).startsWith("1\thello world"), `the allowed call: ${show(textOf(ok))}`);
    // Namespaced calls in the fleet view: the allowed one runs; the rest answer exactly
    // as in the flat view, like tools that do not exist.
    const direct = await c.callTool({ name: `${node}__Read`, arguments: { path: "hello.txt" } });
    expect(!direct.isError && textOf(direct).startsWith("1\thello world"), `the direct call: ${show(textOf(direct))}`);
    const dHidden = await protocolError(c.callTool({ name: `${node}__Bash`, arguments: { command: "true" } }), "direct Bash");
    expect(
      dHidden.message === hidden.message,
      `a direct call of a hidden tool in the fleet view ${show(dHidden.message)} vs flat ${show(hidden.message)}`,
    );
    // fleet_use adds only what the token may call; a node it may not see answers like
    // one that does not exist.
    const used = await c.callTool({ name: "fleet_use", arguments: { nodes: [node] } });
    expect(!used.isError && show(used.structuredContent?.tools) === show([`${node}__Read`]), `fleet_use: ${show(textOf(used))}`);
    const uHidden = await protocolError(c.callTool({ name: "fleet_use", arguments: { nodes: [guarded] } }), "fleet_use unseen");
    const uMissing = await protocolError(c.callTool({ name: "fleet_use", arguments: { nodes: ["nosuchnode"] } }), "fleet_use missing");
    expect(
      uHidden.message.replaceAll(guarded, "X") === uMissing.message.replaceAll("nosuchnode", "X"),
      `fleet_use of an unseen node ${show(uHidden.message)} vs missing ${show(uMissing.message)}`,
    );
    const released = await c.callTool({ name: "fleet_release", arguments: { all: true } });
    expect(!released.isError && isFleetView(await toolNames(c)), `fleet_release: ${show(textOf(released))}`);
  });
}

async function checkResources() {
  // gsv://nodes resources, and resources/list_changed when a node joins.
  const late = `lateres-ts-${ARGS.transport}-${ARGS.mode}`;
  await withClient(ARGS.token, { view: "fleet" }, async (c) => {
    const uris = await resourceUris(c);
    const want = ["gsv://nodes", `gsv://nodes/${ARGS.node}`, `gsv://nodes/${ARGS.guarded}`];
    expect(want.every((u) => uris.has(u)), `resources ${show([...uris])}`);
    const card = await readJson(c, `gsv://nodes/${ARGS.node}`);
    expect(card.id === ARGS.node && card.online === true && card.tools.includes("Read"), `card ${show(card)}`);
    await whenANodeJoins(c, late, "notifications/resources/list_changed", "resourcesListChanged", async () => {
      const after = await resourceUris(c);
      expect(after.has(`gsv://nodes/${late}`), `late node not a resource after the notification: ${show([...after])}`);
    });
  });
}

// --- fleet_run, fleet_jobs, fleet_job ------------------------------------------------
// Nodes `run-a` (long.txt in its workspace), `run-b` (none: `cat` fails), `run-c`
// (offline) and `run-d` (its Bash denied by --run-token's policy).

const RUN_SELECT = "id~run-*";
const RUN_STATUSES = { "run-a": "ok", "run-b": "failed", "run-c": "offline", "run-d": "denied" };

async function checkFleetRun() {
  // fleet_run over nodes with every outcome: a summary first, each node after, one
  // progress notification per node, long texts cut; fleet_job reads the job back whole
  // (in the other view), and another token's job reads like a missing one.
  const seen = [];
  const r = await withClient(ARGS["run-token"], { view: "fleet" }, (c) =>
    c.callTool(
      { name: "fleet_run", arguments: { select: RUN_SELECT, tool: "Bash", args: { command: "cat long.txt" } } },
      { onprogress: (p) => seen.push(p), timeout: 20_000 },
    ),
  );
  const text = textOf(r);
  expect(r.isError === false, `a mixed run is not isError: ${show(text)}`);
  const first = text.split("\n")[0];
  expect(first.startsWith("1 ok, 1 failed, 1 offline, 1 denied \u2014 job "), `summary line ${show(first)}`);
  const job = first.split(" ").pop();
  const sc = r.structuredContent ?? {};
  expect(sc.job === job, `structured job ${sc.job} vs ${job}`);
  const counts = { ok: 1, failed: 1, offline: 1, denied: 1, skipped: 0 };
  expect(Object.entries(counts).every(([k, n]) => sc.summary?.[k] === n), `summary ${show(sc.summary)}`);
  const byNode = Object.fromEntries((sc.results ?? []).map((n) => [n.node, n]));
  for (const [node, status] of Object.entries(RUN_STATUSES)) {
    expect(byNode[node]?.status === status, `${node}: ${show(byNode[node])}`);
    expect(text.includes(`\n[${node}] ${status}`), `no block for ${node}: ${show(text)}`);
  }
  const a = byNode["run-a"];
  expect(a.ok === true && a.cut === true && a.text.length === 2000, `run-a not cut to 2000: ${a.text?.length}`);
  expect(!text.includes("END-OF-LONG"), "the long text was not cut");
  expect(text.includes(`fleet_job {"id": "${job}"}`) && text.includes("[cut: 2000 of "), `no cut note: ${show(text.slice(-400))}`);
  expect(byNode["run-c"].error?.code === "node_offline", `run-c ${show(byNode["run-c"])}`);
  const messages = seen.map((p) => p.message).sort();
  const wanted = Object.entries(RUN_STATUSES).map(([n, st]) => `${n}: ${st}`).sort();
  expect(show(messages) === show(wanted), `progress ${show(seen)}`);
  expect(show(seen.map((p) => p.progress)) === show([1, 2, 3, 4]) && seen.every((p) => p.total === 4), `progress values ${show(seen)}`);

  await withClient(ARGS["run-token"], { view: "flat" }, async (c) => {
    const names = await toolNames(c);
    expect(GATEWAY_TOOLS.every((n) => names.has(n)), "the flat view lacks the gateway tools");
    const j = await c.callTool({ name: "fleet_job", arguments: { id: job } });
    expect(!j.isError, `fleet_job: ${show(textOf(j).slice(0, 300))}`);
    const got = j.structuredContent ?? {};
    expect(got.id === job && got.kind === "fanout" && got.state === "done" && got.select === RUN_SELECT, `job ${show(got).slice(0, 300)}`);
    const whole = Object.fromEntries(got.result.results.map((n) => [n.node, n]));
    const kept = whole["run-a"].result.content.map((b) => b.text ?? "").join("");
    expect(kept.includes("END-OF-LONG") && kept.length > 5000, `the job does not keep run-a's whole text (${kept.length})`);
    const listed = await c.callTool({ name: "fleet_jobs", arguments: { limit: 10 } });
    expect((listed.structuredContent?.jobs ?? []).some((x) => x.id === job), `fleet_jobs lacks ${job}`);
  });

  await withClient(ARGS["other-token"], { view: "fleet" }, async (c) => {
    const theirs = await c.callTool({ name: "fleet_job", arguments: { id: job } });
    const missing = await c.callTool({ name: "fleet_job", arguments: { id: "0".repeat(32) } });
    expect(theirs.isError === true && textOf(theirs).startsWith("not_found:"), `another token's job: ${show(textOf(theirs))}`);
    expect(
      textOf(theirs).replaceAll(job, "X") === textOf(missing).replaceAll("0".repeat(32), "X"),
      `another token's job ${show(textOf(theirs))} vs a missing one ${show(textOf(missing))}`,
    );
    const listed = await c.callTool({ name: "fleet_jobs", arguments: {} });
    expect(!(listed.structuredContent?.jobs ?? []).some((x) => x.id === job), `another token lists ${job}`);
  });

  await withClient(ARGS["admin-token"], { view: "flat" }, async (c) => {
    const listed = await c.callTool({ name: "fleet_jobs", arguments: { limit: 500 } });
    expect((listed.structuredContent?.jobs ?? []).some((x) => x.id === job), `the admin does not list ${job}`);
  });
}

async function checkFleetRunCancel() {
  // A cancelled fleet_run cancels its node calls: the commands are killed.
  const tag = `ts-${ARGS.transport}-${ARGS.mode}`;
  const pidfile = join(ARGS["run-workspace"], `run-cancel-${tag}.pid`);
  const command = `echo $$ > run-cancel-${tag}.pid; exec sleep 60`;
  await withClient(ARGS["run-token"], { view: "fleet" }, async (c) => {
    await cancelled(pidfile, (options) =>
      c.callTool({ name: "fleet_run", arguments: { select: "id~run-a", tool: "Bash", args: { command } } }, options),
    );
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
  "elicit-plan": checkElicitPlan,
  "no-self-approval": checkNoSelfApproval,
  "guard-operator": checkGuardOperator,
  "operator-queue": checkOperatorQueue,
  "list-changed": checkListChanged,
  "fleet-list": checkFleetList,
  "fleet-nodes": checkFleetNodes,
  "fleet-tools": checkFleetTools,
  "fleet-call": checkFleetCall,
  "fleet-progress": checkFleetProgress,
  "fleet-cancel": checkFleetCancel,
  "fleet-elicit": checkFleetElicit,
  "fleet-operator-queue": checkFleetOperatorQueue,
  "fleet-guard": checkFleetGuard,
  select: checkSelect,
  "view-override": checkViewOverride,
  "auto-threshold": checkAutoThreshold,
  "by-name": checkByName,
  "by-name-small": checkByNameSmall,
  "no-leak": checkNoLeak,
  resources: checkResources,
  "fleet-run": checkFleetRun,
  "fleet-run-cancel": checkFleetRunCancel,
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
  --confirm-token T --self-confirm-token T --only-read-token T --fleet-token T
  --guarded NODE --node NODE --offline-node NODE [--default-view flat|fleet|auto]
  [--run-token T --other-token T --admin-token T --run-workspace DIR] CHECK... (${Object.keys(CHECKS).join(", ")})`;

function parse() {
  const names = ["transport", "mode", "url", "gateway", "gsv", "data", "empty-data", "workspace", "token",
    "limited-token", "confirm-token", "self-confirm-token", "only-read-token", "fleet-token", "guarded", "node",
    "offline-node", "default-view", "run-token", "other-token", "admin-token", "run-workspace"];
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
  const optional = ["default-view", "run-token", "other-token", "admin-token", "run-workspace"];
  const missing = names.filter((n) => args[n] === undefined && !optional.includes(n));
  if (missing.length) throw new Error(`missing --${missing.join(", --")}\n${USAGE}`);
  if (!["http", "stdio"].includes(args.transport)) throw new Error(`bad --transport\n${USAGE}`);
  if (!["legacy", "auto"].includes(args.mode)) throw new Error(`bad --mode\n${USAGE}`);
  if (args["default-view"] !== undefined && !["flat", "fleet", "auto"].includes(args["default-view"])) {
    throw new Error(`bad --default-view\n${USAGE}`);
  }
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
