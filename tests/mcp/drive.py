#!/usr/bin/env python3
"""Drives gsv's MCP server with the official MCP Python SDK (PyPI package `mcp`).

Started by `tests/e2e_mcp.rs`, which brings up a real gateway and real nodes first:

- `alpha`: online, with `hello.txt` in its workspace;
- `gone`: connected once, then killed (known but offline).

The script connects either to `/mcp` over Streamable HTTP (`--transport http`) or to
`gsv mcp` over stdio (`--transport stdio`), in one of the SDK's two protocol modes:
`legacy` (the `initialize` handshake, protocol 2025-11-25, a session) or `auto` (probes
`server/discover` and adopts the session-less 2026-07-28 revision when the server
offers it). It runs the named checks and prints `PASS name` or `FAIL name: why` for
each; the exit code is 0 only if every check passed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
from typing import Any
from urllib.parse import urlencode

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

ARGS: argparse.Namespace


class CheckFailed(Exception):
    pass


def root_cause(e: BaseException) -> BaseException:
    """The first leaf of nested exception groups (anyio wraps failures in them)."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return e


def expect(cond: bool, why: str) -> None:
    if not cond:
        raise CheckFailed(why)


def mcp_url(view: str | None = None, select: str | None = None, tools: str | None = None) -> str:
    """The /mcp URL with `?view=`, `?select=` and `?tools=` when given."""
    query = {k: v for k, v in (("view", view), ("select", select), ("tools", tools)) if v is not None}
    return f"{ARGS.url}?{urlencode(query)}" if query else ARGS.url


def client(token: str | None, view: str | None = None, select: str | None = None, tools: str | None = None,
           **kw: Any) -> Client:
    """A client of the server under test, authenticated with `token`, asking for
    `view` and `select` (URL query over HTTP, `gsv mcp --view/--select` over stdio).
    Without `view`, the suite's `--default-view` (none: the token's own choice)."""
    view = view or ARGS.default_view
    if ARGS.transport == "http":
        headers = {"Authorization": f"Bearer {token}"} if token else None
        http = create_mcp_http_client(headers=headers)
        url = mcp_url(view, select, tools)
        return Client(streamable_http_client(url, http_client=http), mode=ARGS.mode, **kw)
    if tools is not None:
        raise CheckFailed("?tools= is asked for over HTTP only")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GSV_") and k != "RUST_LOG"}
    args = ["mcp", "--gateway", ARGS.gateway, "--data", ARGS.empty_data]
    if token:
        args += ["--token", token]
    if view:
        args += ["--view", view]
    if select:
        args += ["--select", select]
    params = StdioServerParameters(command=ARGS.gsv, args=args, env=env)
    return Client(params, mode=ARGS.mode, **kw)


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if getattr(b, "type", None) == "text")


async def all_tools(c: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor = None
    for _ in range(100):
        page = await c.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools
    raise CheckFailed("tools/list never ended")


# --- checks -------------------------------------------------------------------------


async def check_list() -> None:
    async with client(ARGS.token) as c:
        if ARGS.mode == "legacy":
            expect(c.protocol_version == "2025-11-25", f"negotiated {c.protocol_version}")
        else:
            expect(c.protocol_version == "2026-07-28", f"auto mode adopted {c.protocol_version}")
        tools = {t.name: t for t in await all_tools(c)}
        node = ARGS.node
        for name in (f"{node}__Read", f"{node}__Bash", f"{node}__Echo", f"{ARGS.offline_node}__Read"):
            expect(name in tools, f"{name} not listed: {sorted(tools)}")
        read = tools[f"{node}__Read"]
        # The node's OS is in the prefix: `[alpha · linux] ...`.
        expect((read.description or "").startswith(f"[{node} \u00b7 "), f"description {read.description!r}")
        expect(read.input_schema.get("type") == "object", f"schema {read.input_schema}")
        expect("path" in read.input_schema.get("properties", {}), "Read schema has no path")
        expect(read.annotations is not None and read.annotations.read_only_hint is True, f"Read annotations {read.annotations}")
        bash = tools[f"{node}__Bash"]
        a = bash.annotations
        expect(a is not None and a.destructive_hint is True and a.read_only_hint is False, f"Bash annotations {a}")
        expect(a.open_world_hint is True and a.idempotent_hint is False, f"Bash annotations {a}")
    # The default URL (auto): each node lists its reference tools and every fleet tool;
    # the rest are described by fleet_tools and called by name.
    async with client(ARGS.token, view="auto") as c:
        tools = {t.name for t in await all_tools(c)}
        for name in (f"{node}__Read", f"{node}__Bash", f"{ARGS.offline_node}__Read", "fleet_tools", "fleet_call"):
            expect(name in tools, f"{name} not listed by default: {sorted(tools)}")
        expect(f"{node}__Echo" not in tools and f"{node}__git_log" not in tools, f"not the reference set: {sorted(tools)}")
        r = await c.call_tool("fleet_tools", {"node": node, "tools": ["Echo"]})
        expect([d["name"] for d in (r.structured_content or {}).get("tools", [])] == ["Echo"], f"fleet_tools Echo: {text_of(r)}")
        r = await c.call_tool(f"{node}__Echo", {"text": "unlisted"})
        expect(not r.is_error and text_of(r).startswith("unlisted"), f"an unlisted tool called by name: {text_of(r)!r}")


async def check_read() -> None:
    async with client(ARGS.token) as c:
        r = await c.call_tool(f"{ARGS.node}__Read", {"path": "hello.txt"})
        expect(not r.is_error, f"isError: {text_of(r)}")
        expect(r.content[0].type == "text" and r.content[0].text == "1\thello world", f"content {r.content}")
        sc = r.structured_content or {}
        expect(sc.get("lines") == 1, f"structuredContent {sc}")
        # The structured result is also there as JSON text, for text-only clients.
        expect(any(json.loads(b.text) == sc for b in r.content[1:] if b.type == "text"), "no JSON text block")


async def check_bash_progress() -> None:
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    async with client(ARGS.token) as c:
        cmd = "for i in 1 2 3; do echo tick$i; sleep 1; done"
        r = await c.call_tool(f"{ARGS.node}__Bash", {"command": cmd}, progress_callback=on_progress)
        expect(not r.is_error, f"isError: {text_of(r)}")
        expect("tick3" in text_of(r), f"output {text_of(r)!r}")
        expect(len(seen) >= 1, "no progress notification")
        expect(any(m and "tick" in m for _, m in seen), f"progress messages carry no output: {seen}")
        values = [p for p, _ in seen]
        expect(values == sorted(values) and len(set(values)) == len(values), f"progress not increasing: {values}")


async def check_tool_error() -> None:
    async with client(ARGS.token) as c:
        r = await c.call_tool(f"{ARGS.node}__Read", {"path": "does-not-exist.txt"})
        expect(r.is_error is True, "reading a missing file is not isError")
        expect("not found" in text_of(r).lower() or "no such" in text_of(r).lower(), f"text {text_of(r)!r}")
        # Arguments that fail the tool's schema are a tool error too (MCP 2025-11-25).
        r = await c.call_tool(f"{ARGS.node}__Read", {"path": 5})
        expect(r.is_error is True and text_of(r).startswith("invalid_args:"), f"bad args: {text_of(r)!r}")
        # An unknown tool is a protocol error.
        try:
            await c.call_tool(f"{ARGS.node}__Nope", {})
        except MCPError as e:
            expect(e.code == -32602, f"unknown tool code {e.code}")
        else:
            raise CheckFailed("calling an unknown tool did not fail")


async def check_offline() -> None:
    async with client(ARGS.token) as c:
        r = await c.call_tool(f"{ARGS.offline_node}__Echo", {"text": "hi"})
        expect(r.is_error is True, "calling an offline node is not isError")
        t = text_of(r)
        expect(f"node {ARGS.offline_node} is offline since" in t, f"text {t!r}")


async def check_hidden() -> None:
    async with client(ARGS.limited_token) as c:
        names = {t.name for t in await all_tools(c)}
        expect(f"{ARGS.node}__Read" in names, f"allowed tool missing: {sorted(names)}")
        expect(f"{ARGS.node}__Bash" not in names, "a denied tool is listed")
        expect(not any(n.startswith(f"{ARGS.offline_node}__") for n in names), "tools outside the allow globs are listed")
        try:
            await c.call_tool(f"{ARGS.node}__Bash", {"command": "true"})
        except MCPError as e:
            expect(e.code == -32602, f"hidden tool code {e.code}")
        else:
            raise CheckFailed("calling a hidden tool did not fail")


async def check_unauthorized() -> None:
    if ARGS.transport == "http":
        async with httpx2.AsyncClient() as http:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            hdrs = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
            r = await http.post(ARGS.url, json=body, headers=hdrs)
            expect(r.status_code == 401, f"status {r.status_code}")
            challenge = r.headers.get("www-authenticate", "")
            expect(challenge.startswith("Bearer ") and "resource_metadata=" in challenge, f"challenge {challenge!r}")
            meta_url = challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]
            meta = (await http.get(meta_url)).json()
            expect(meta.get("resource") == ARGS.url, f"metadata {meta}")
            r = await http.post(ARGS.url, json=body, headers={**hdrs, "authorization": "Bearer gsv_agent_000000000000_nope"})
            expect(r.status_code == 401 and "invalid_token" in r.headers.get("www-authenticate", ""), "bad token not refused")
            r = await http.post(ARGS.url, json=body, headers={**hdrs, "authorization": f"Bearer {ARGS.token}", "origin": "https://evil.example"})
            expect(r.status_code == 403, f"foreign Origin: status {r.status_code}")
    failed = False
    try:
        async with client("gsv_agent_000000000000_nope") as c:
            await c.list_tools()
    except BaseException as e:  # noqa: BLE001 - the SDK raises transport-specific errors
        failed = True
        cause = root_cause(e)
        detail = "".join(traceback.format_exception_only(type(cause), cause))
        if ARGS.transport == "stdio":
            expect("unauthorized" in detail or "401" in detail or "invalid" in detail, f"error {detail!r}")
    expect(failed, "a client with a bad token could list tools")


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except OSError:
        return False


async def check_cancel() -> None:
    pidfile = os.path.join(ARGS.workspace, f"cancel-{ARGS.transport}-{ARGS.mode}.pid")
    async with client(ARGS.token) as c:
        cmd = f"echo $$ > {pidfile}; exec sleep 60"
        with anyio.move_on_after(2.5):
            await c.call_tool(f"{ARGS.node}__Bash", {"command": cmd})
            raise CheckFailed("the call finished instead of being cancelled")
        expect(os.path.exists(pidfile), "the command never started")
        with open(pidfile) as f:
            pid = int(f.read().strip())
        deadline = time.monotonic() + 10
        while pid_alive(pid) and time.monotonic() < deadline:
            await anyio.sleep(0.1)
        expect(not pid_alive(pid), f"process {pid} still runs after the call was cancelled")
        # The session still works.
        r = await c.call_tool(f"{ARGS.node}__Echo", {"text": "after"})
        expect(text_of(r).startswith("after"), f"echo after cancel: {text_of(r)!r}")


def answering(asked: list[str], action: str):
    """An elicitation callback that records each question and answers `action`."""

    async def cb(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action=action, content={} if action == "accept" else None)

    return cb


async def check_elicit() -> None:
    """A token made with --self-confirm: the client's user answers its confirm questions."""
    asked: list[str] = []
    name = f"{ARGS.node}__Echo"
    async with client(ARGS.self_confirm_token, elicitation_callback=answering(asked, "accept")) as c:
        r = await c.call_tool(name, {"text": "approved"})
        expect(not r.is_error and text_of(r).startswith("approved"), f"accepted call: {text_of(r)!r}")
        expect(asked and asked[-1].startswith(f"Allow {name}: "), f"question {asked}")
    async with client(ARGS.self_confirm_token, elicitation_callback=answering(asked, "decline")) as c:
        r = await c.call_tool(name, {"text": "refused"})
        expect(r.is_error is True and text_of(r).startswith("denied:"), f"declined call: {text_of(r)!r}")


async def check_elicit_plan() -> None:
    """The user's question names the file the node resolved the agent's path to (a
    symlink followed), and the answer holds only for that file: the link re-pointed
    while the user reads changes nothing. Asked during the call (legacy), the approved
    call goes to the file the question named; asked before it (2026-07-28's
    InputRequiredResult), the retry finds the path resolving elsewhere and waits for
    an operator (who denies it here)."""
    tag = f"plan-{ARGS.transport}-{ARGS.mode}"
    first, second = (os.path.join(ARGS.workspace, f"{tag}-{n}") for n in ("a", "b"))
    link = os.path.join(ARGS.workspace, f"{tag}-link")
    os.makedirs(first)
    os.makedirs(second)
    os.symlink(first, link)
    asked: list[str] = []

    async def repoint(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        os.remove(link)
        os.symlink(second, link)
        return types.ElicitResult(action="accept", content={})

    legacy = ARGS.mode == "legacy"
    async with client(ARGS.self_confirm_token, elicitation_callback=repoint) as c:
        async with anyio.create_task_group() as tg:
            if not legacy:
                tg.start_soon(decide_when_asked, ARGS.node, "Write", "deny")
            r = await c.call_tool(f"{ARGS.node}__Write", {"path": f"{tag}-link/f.txt", "content": "x"})
    shown = os.path.join(os.path.realpath(first), "f.txt")
    expect(len(asked) == 1 and f'"{shown}"' in asked[0] and "nothing there yet" in asked[0],
           f"the question names the resolved file {shown}: {asked}")
    expect(not os.path.exists(os.path.join(second, "f.txt")), "written through the re-pointed link")
    if legacy:
        expect(not r.is_error and os.path.exists(shown), f"the approved file was not written: {text_of(r)!r}")
    else:
        expect(r.is_error is True and text_of(r).startswith("denied:"),
               f"a retry whose path resolves elsewhere was not left to the operator: {text_of(r)!r}")
        expect(not os.path.exists(shown), "the retry wrote although the operator denied it")


def gsv_cli(*args: str) -> str:
    out = subprocess.run([ARGS.gsv, *args, "--data", ARGS.data], capture_output=True, text=True, timeout=20)
    if out.returncode != 0:
        raise CheckFailed(f"gsv {' '.join(args)}: {out.stderr}")
    return out.stdout


async def decide_when_asked(node: str, tool: str, decision: str) -> None:
    """Plays the operator: decides the first pending request for node/tool."""
    for _ in range(150):
        pending = json.loads(gsv_cli("approvals", "list", "--json"))
        pending = pending.get("approvals", pending) if isinstance(pending, dict) else pending
        mine = [p for p in pending if p.get("tool") == tool and p.get("node") == node]
        if mine:
            gsv_cli("approvals", decision, mine[0]["id"])
            return
        await anyio.sleep(0.1)
    raise CheckFailed(f"no approval request for {node}__{tool} appeared")


async def check_no_self_approval() -> None:
    """A token without --self-confirm cannot answer its own confirm question, even when
    its client declares elicitation and accepts everything: an operator decides."""
    asked: list[str] = []
    async with client(ARGS.confirm_token, elicitation_callback=answering(asked, "accept")) as c:
        async with anyio.create_task_group() as tg:
            tg.start_soon(decide_when_asked, ARGS.node, "Echo", "deny")
            r = await c.call_tool(f"{ARGS.node}__Echo", {"text": "self-approved?"})
    expect(not asked, f"the client was asked to approve its own call: {asked}")
    expect(r.is_error is True and text_of(r).startswith("denied:"), f"call not denied by the operator: {text_of(r)!r}")


async def check_guard_operator() -> None:
    """A node guard's approval (--approve-shell) always goes to an operator, never to the
    caller, whatever the token: full access, or --self-confirm with confirm on the tool."""
    name = f"{ARGS.guarded}__Bash"
    # With --self-confirm the caller answers the policy's question (1 asked); the
    # guard's is the operator's.
    tokens = [("full", ARGS.token, 0), ("self-confirm", ARGS.self_confirm_token, 1)]
    for label, token, want_asked in tokens:
        marker = os.path.join(ARGS.workspace, f"pwned-{ARGS.transport}-{ARGS.mode}-{label}")
        asked: list[str] = []
        async with client(token, elicitation_callback=answering(asked, "accept")) as c:
            async with anyio.create_task_group() as tg:
                tg.start_soon(decide_when_asked, ARGS.guarded, "Bash", "deny")
                r = await c.call_tool(name, {"command": f"touch {marker}"})
        expect(len(asked) == want_asked, f"{label}: the client was asked {asked}")
        expect(r.is_error is True and text_of(r).startswith("denied:"), f"{label}: not denied by the operator: {text_of(r)!r}")
        expect(not os.path.exists(marker), f"{label}: the command ran without an operator")


async def check_operator_queue() -> None:
    """Without elicitation the call waits for an operator, and the result says so."""

    async def approve_when_asked() -> None:
        await decide_when_asked(ARGS.node, "Echo", "approve")

    async with client(ARGS.confirm_token) as c:
        async with anyio.create_task_group() as tg:
            tg.start_soon(approve_when_asked)
            r = await c.call_tool(f"{ARGS.node}__Echo", {"text": "queued"})
        expect(not r.is_error and text_of(r).startswith("queued"), f"queued call: {text_of(r)!r}")
        expect("operator queue" in text_of(r), f"the result does not say it waited: {text_of(r)!r}")


async def check_list_changed() -> None:
    """A node that connects changes the list: the client hears of it."""
    heard = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            heard.set()

    late = f"late-{ARGS.transport}-{ARGS.mode}"
    token = gsv_cli("token", "create", "node", late).strip()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GSV_")}
    env["RUST_LOG"] = "warn"
    node_cmd = [ARGS.gsv, "node", "--gateway", ARGS.gateway, "--id", late, "--token", token,
                "--workspace", ARGS.workspace, "--data", os.path.join(ARGS.workspace, f"{late}-data")]
    # Flat asked for: the late node grows the fleet, and a session-less client's `auto`
    # is decided on each request.
    async with client(ARGS.token, view="flat", message_handler=on_message) as c:
        names = {t.name for t in await all_tools(c)}
        expect(f"{late}__Read" not in names, "late node listed too early")
        proc = None
        try:
            if ARGS.mode == "legacy":
                await anyio.sleep(0.5)  # let the standalone stream open
                proc = subprocess.Popen(node_cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
                with anyio.fail_after(15):
                    await heard.wait()
            else:
                async with c.listen(tools_list_changed=True) as sub:
                    proc = subprocess.Popen(node_cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
                    with anyio.fail_after(15):
                        async for _event in sub:
                            break
            names = {t.name for t in await all_tools(c)}
            expect(f"{late}__Read" in names, f"late node not listed after the notification: {sorted(names)}")
        finally:
            if proc is not None:
                proc.kill()
                proc.wait()


# --- fleet view, views and selection ----------------------------------------------

# The gateway tools no node offers, listed in both views (and nothing else of the fleet
# view is listed flat).
GATEWAY_TOOLS = {"fleet_run", "fleet_jobs", "fleet_job", "fleet_copy"}
REFERENCE_TOOLS = ("Bash", "Process", "Read", "Write", "Edit", "Glob", "Grep")
FLEET_TOOLS = {"fleet_nodes", "fleet_tools", "fleet_call", "fleet_use", "fleet_release"} | GATEWAY_TOOLS
FLEET_ONLY = FLEET_TOOLS - GATEWAY_TOOLS


async def node_tool_names(c: Client) -> set[str]:
    """The flat listing without the gateway tools: the nodes' tools."""
    names = {t.name for t in await all_tools(c)}
    expect(GATEWAY_TOOLS <= names, f"the flat view does not list {sorted(GATEWAY_TOOLS - names)}")
    return names - FLEET_TOOLS


# What the default listing names on each node (gateway/src/mcp/listed.rs).
REFERENCE = {"Bash", "Process", "Read", "Write", "Edit", "Glob", "Grep"}


async def names_of(c: Client) -> set[str]:
    return {t.name for t in await all_tools(c)}


async def fleet_call(c: Client, node: str, tool: str, args: dict, **kw: Any) -> types.CallToolResult:
    return await c.call_tool("fleet_call", {"node": node, "tool": tool, "args": args}, **kw)


async def rpc_error(call: Any) -> MCPError:
    """The JSON-RPC error `call` (an awaitable) fails with; fails the check if it succeeds."""
    try:
        await call
    except MCPError as e:
        return e
    raise CheckFailed("the request succeeded instead of failing")


async def all_nodes(c: Client, **args: Any) -> list[dict]:
    nodes: list[dict] = []
    cursor = None
    for _ in range(100):
        r = await c.call_tool("fleet_nodes", {**args, **({"cursor": cursor} if cursor else {})})
        expect(not r.is_error, f"fleet_nodes: {text_of(r)}")
        page = r.structured_content or {}
        nodes.extend(page.get("nodes", []))
        cursor = page.get("nextCursor")
        if not cursor:
            return nodes
    raise CheckFailed("fleet_nodes never ended")


async def check_fleet_list() -> None:
    """The fleet view lists six gateway tools, small, whatever the fleet."""
    async with client(ARGS.token, view="fleet") as c:
        tools = await all_tools(c)
        expect({t.name for t in tools} == FLEET_TOOLS, f"fleet listing {[t.name for t in tools]}")
        size = len(json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]))
        expect(size <= 6 * 1024, f"the fleet listing is {size} bytes")
        desc = {t.name: t.description or "" for t in tools}
        expect("select" in desc["fleet_nodes"] and "fact." in desc["fleet_nodes"], "fleet_nodes does not explain select")


async def check_fleet_nodes() -> None:
    async with client(ARGS.token, view="fleet") as c:
        nodes = {n["id"]: n for n in await all_nodes(c)}
        for n in (ARGS.node, ARGS.offline_node, ARGS.guarded):
            expect(n in nodes, f"{n} not in fleet_nodes: {sorted(nodes)}")
        alpha = nodes[ARGS.node]
        expect(alpha["online"] is True and not nodes[ARGS.offline_node]["online"], f"online flags {nodes}")
        expect({"Read", "Bash", "Echo"} <= set(alpha["tools"]), f"alpha tools {alpha['tools']}")
        expect(alpha.get("os") == "linux" and "labels" in alpha, f"alpha card {alpha}")
        picked = await all_nodes(c, select=f"id~{ARGS.node}")
        expect([n["id"] for n in picked] == [ARGS.node], f"select id~{ARGS.node}: {picked}")
        r = await c.call_tool("fleet_nodes", {"select": "a,,b"})
        expect(r.is_error is True and text_of(r).startswith("invalid_args:"), f"bad select: {text_of(r)!r}")
        r = await c.call_tool("fleet_nodes", {"cursor": "nonsense"})
        expect(r.is_error is True and "cursor" in text_of(r), f"bad cursor: {text_of(r)!r}")


async def check_fleet_tools() -> None:
    async with client(ARGS.token, view="fleet") as c:
        r = await c.call_tool("fleet_tools", {"node": ARGS.node, "tools": ["Read"]})
        expect(not r.is_error, f"fleet_tools: {text_of(r)}")
        sc = r.structured_content or {}
        defs = sc.get("tools", [])
        expect([d["name"] for d in defs] == ["Read"], f"definitions {defs}")
        expect("path" in defs[0]["inputSchema"].get("properties", {}), f"Read schema {defs[0]}")
        expect(defs[0].get("annotations", {}).get("readOnlyHint") is True, f"Read annotations {defs[0]}")
        r = await c.call_tool("fleet_tools", {"node": ARGS.node})
        names = {d["name"] for d in (r.structured_content or {}).get("tools", [])}
        expect({"Read", "Bash", "Echo"} <= names, f"all of alpha's tools: {names}")


async def audit_calls() -> list[dict]:
    rows = [json.loads(line) for line in gsv_cli("audit", "tail", "-n", "50", "--json").splitlines() if line.strip()]
    return [r for r in rows if r.get("kind") == "call"]


async def check_fleet_call() -> None:
    """fleet_call is the routed call of NODE__TOOL: same result, same audit row."""
    marker = f"fleet-call-{ARGS.transport}-{ARGS.mode}"
    path = os.path.join(ARGS.workspace, f"{marker}.txt")
    with open(path, "w") as f:
        f.write("same\n")
    args = {"path": f"{marker}.txt"}
    async with client(ARGS.token, view="flat") as c:
        flat = await c.call_tool(f"{ARGS.node}__Read", args)
    async with client(ARGS.token, view="fleet") as c:
        fleet = await fleet_call(c, ARGS.node, "Read", args)
        # A whole-number count with a fraction is rounded down, not refused.
        odd = await c.call_tool("fleet_call", {"node": ARGS.node, "tool": "Read", "args": args, "timeoutMs": 1500.5})
        expect(not odd.is_error and text_of(odd).startswith("1\tsame"), f"fleet_call timeoutMs 1500.5: {text_of(odd)!r}")
        expect((fleet.content, fleet.structured_content, fleet.is_error) == (flat.content, flat.structured_content, flat.is_error),
               f"fleet {fleet} != flat {flat}")
        expect(text_of(fleet).startswith("1\tsame"), f"fleet_call Read: {text_of(fleet)!r}")
        # Names are checked by gsv's rules; unknown tools are the flat view's error.
        r = await c.call_tool("fleet_call", {"node": "Bad_Node", "tool": "Read"})
        expect(r.is_error is True and text_of(r).startswith("invalid_args:"), f"bad node id: {text_of(r)!r}")
        e = await rpc_error(fleet_call(c, ARGS.node, "Nope", {}))
        expect(e.code == -32602 and f"{ARGS.node}__Nope" in str(e), f"unknown tool: {e}")
        # A namespaced name works in the fleet view too, though it lists none: the
        # same routed call.
        direct = await c.call_tool(f"{ARGS.node}__Read", args)
        expect((direct.content, direct.structured_content, direct.is_error) == (flat.content, flat.structured_content, flat.is_error),
               f"direct {direct} != flat {flat}")
        e = await rpc_error(c.call_tool(f"{ARGS.node}__Nope", {}))
        expect(e.code == -32602 and f"{ARGS.node}__Nope" in str(e), f"unknown namespaced tool in the fleet view: {e}")
    mine: list[dict] = []
    for _ in range(50):
        rows = await audit_calls()
        mine = [r for r in rows if r.get("node") == ARGS.node and r.get("tool") == "Read" and r.get("outcome") == "ok"]
        if len(mine) >= 3:
            break
        await anyio.sleep(0.1)
    expect(len(mine) >= 3, f"audit rows of the three calls: {mine}")
    keys = ("kind", "actor", "node", "tool", "argsHash", "outcome")
    a, b, d = ({k: r.get(k) for k in keys} for r in mine[-3:])
    expect(a == b == d, f"audit rows differ: flat {a} fleet {b} direct {d}")


async def check_fleet_progress() -> None:
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    async with client(ARGS.token, view="fleet") as c:
        cmd = "for i in 1 2 3; do echo tick$i; sleep 1; done"
        r = await fleet_call(c, ARGS.node, "Bash", {"command": cmd}, progress_callback=on_progress)
        expect(not r.is_error and "tick3" in text_of(r), f"fleet_call Bash: {text_of(r)!r}")
        expect(any(m and "tick" in m for _, m in seen), f"no progress with output: {seen}")


async def check_fleet_cancel() -> None:
    pidfile = os.path.join(ARGS.workspace, f"fleet-cancel-{ARGS.transport}-{ARGS.mode}.pid")
    async with client(ARGS.token, view="fleet") as c:
        with anyio.move_on_after(2.5):
            await fleet_call(c, ARGS.node, "Bash", {"command": f"echo $$ > {pidfile}; exec sleep 60"})
            raise CheckFailed("the call finished instead of being cancelled")
        expect(os.path.exists(pidfile), "the command never started")
        with open(pidfile) as f:
            pid = int(f.read().strip())
        deadline = time.monotonic() + 10
        while pid_alive(pid) and time.monotonic() < deadline:
            await anyio.sleep(0.1)
        expect(not pid_alive(pid), f"process {pid} still runs after fleet_call was cancelled")
        r = await fleet_call(c, ARGS.node, "Echo", {"text": "after"})
        expect(text_of(r).startswith("after"), f"echo after cancel: {text_of(r)!r}")


async def check_fleet_elicit() -> None:
    """A --self-confirm token's confirm glob, through fleet_call: the user is asked about
    the namespaced call."""
    asked: list[str] = []
    async with client(ARGS.self_confirm_token, view="fleet", elicitation_callback=answering(asked, "accept")) as c:
        r = await fleet_call(c, ARGS.node, "Echo", {"text": "fleet-approved"})
        expect(not r.is_error and text_of(r).startswith("fleet-approved"), f"accepted: {text_of(r)!r}")
        expect(asked and asked[-1].startswith(f"Allow {ARGS.node}__Echo: "), f"question {asked}")
    async with client(ARGS.self_confirm_token, view="fleet", elicitation_callback=answering(asked, "decline")) as c:
        r = await fleet_call(c, ARGS.node, "Echo", {"text": "fleet-refused"})
        expect(r.is_error is True and text_of(r).startswith("denied:"), f"declined: {text_of(r)!r}")


async def check_fleet_operator_queue() -> None:
    async with client(ARGS.confirm_token, view="fleet") as c:
        async with anyio.create_task_group() as tg:
            tg.start_soon(decide_when_asked, ARGS.node, "Echo", "approve")
            r = await fleet_call(c, ARGS.node, "Echo", {"text": "fleet-queued"})
        expect(not r.is_error and text_of(r).startswith("fleet-queued"), f"queued: {text_of(r)!r}")
        expect("operator queue" in text_of(r), f"the result does not say it waited: {text_of(r)!r}")


async def check_fleet_guard() -> None:
    """A node guard's approval through fleet_call goes to an operator, never the caller."""
    marker = os.path.join(ARGS.workspace, f"fleet-pwned-{ARGS.transport}-{ARGS.mode}")
    asked: list[str] = []
    async with client(ARGS.token, view="fleet", elicitation_callback=answering(asked, "accept")) as c:
        async with anyio.create_task_group() as tg:
            tg.start_soon(decide_when_asked, ARGS.guarded, "Bash", "deny")
            r = await fleet_call(c, ARGS.guarded, "Bash", {"command": f"touch {marker}"})
    expect(not asked, f"the client was asked: {asked}")
    expect(r.is_error is True and text_of(r).startswith("denied:"), f"not denied by the operator: {text_of(r)!r}")
    expect(not os.path.exists(marker), "the command ran without an operator")


async def check_select() -> None:
    """?select= narrows the session to some nodes, shown flat; a node outside it is
    unknown, exactly like a tool that does not exist."""
    sel = f"id~{ARGS.node}"
    async with client(ARGS.token, select=sel) as c:
        names = await node_tool_names(c)
        expect(names and all(n.startswith(f"{ARGS.node}__") for n in names), f"select {sel}: {sorted(names)}")
        r = await c.call_tool(f"{ARGS.node}__Echo", {"text": "picked"})
        expect(text_of(r).startswith("picked"), f"call inside the selection: {text_of(r)!r}")
        outside = await rpc_error(c.call_tool(f"{ARGS.guarded}__Echo", {"text": "x"}))
        missing = await rpc_error(c.call_tool("nosuchnode__Echo", {"text": "x"}))
        expect(outside.code == missing.code == -32602, f"codes {outside.code} {missing.code}")
        expect(str(outside).replace(ARGS.guarded, "N") == str(missing).replace("nosuchnode", "N"),
               f"outside the selection {outside!s} vs missing {missing!s}")
        res = await c.list_resources()
        expect({r.uri for r in res.resources} == {"gsv://nodes", f"gsv://nodes/{ARGS.node}"}, f"resources {res.resources}")
    async with client(ARGS.token, view="fleet", select=sel) as c:
        expect([n["id"] for n in await all_nodes(c)] == [ARGS.node], "fleet_nodes outside the selection")
        e = await rpc_error(fleet_call(c, ARGS.guarded, "Echo", {"text": "x"}))
        expect(e.code == -32602, f"fleet_call outside the selection: {e}")
    if ARGS.transport == "http":
        async with httpx2.AsyncClient() as http:
            hdrs = {"accept": "application/json, text/event-stream", "content-type": "application/json",
                    "authorization": f"Bearer {ARGS.token}"}
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            for url, what in ((mcp_url(select="a,,b"), "select"), (mcp_url(view="tree"), "view")):
                r = await http.post(url, json=body, headers=hdrs)
                expect(r.status_code == 400, f"bad ?{what}=: status {r.status_code}")
                err = r.json().get("error", {})
                expect(err.get("code") == -32602 and f"?{what}=" in err.get("message", ""), f"bad ?{what}=: {r.text}")


async def check_view_override() -> None:
    """The token's --mcp-view is its default; ?view= (gsv mcp --view) overrides it."""
    async with client(ARGS.fleet_token) as c:
        expect(await names_of(c) == FLEET_TOOLS, "a --mcp-view fleet token did not get the fleet view")
    async with client(ARGS.fleet_token, view="flat") as c:
        names = await names_of(c)
        expect(f"{ARGS.node}__Read" in names and not names & FLEET_ONLY and GATEWAY_TOOLS <= names,
               f"?view=flat: {sorted(names)}")
    async with client(ARGS.token, view="fleet") as c:
        expect(await names_of(c) == FLEET_TOOLS, "?view=fleet did not give the fleet view")


async def check_auto_threshold() -> None:
    """auto: each node's reference tools and every fleet tool, flat, while the listing
    is small; weighed by bytes, not by a count: every tool of this fleet (`?tools=all`)
    is past it, so the fleet view, while one token's single tool stays flat."""
    async with client(ARGS.token) as c:
        listed = {t.name for t in await all_tools(c)}
        nodes = {n.split("__")[0] for n in listed if "__" in n}
        expect(FLEET_TOOLS <= listed, f"the default listing lacks fleet tools: {sorted(listed)}")
        expect({ARGS.node, ARGS.offline_node} <= nodes, f"nodes listed: {sorted(nodes)}")
        expect(all(n.split("__")[1] in REFERENCE for n in listed if "__" in n), f"not the reference set: {sorted(listed)}")
        expect(f"{ARGS.node}__Bash" in listed, "Bash is not listed")
        size = len(json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in await all_tools(c)]))
        expect(size <= 48 * 1024, f"the default listing is {size} bytes")
    async with client(ARGS.token, view="flat") as c:
        many = len(await node_tool_names(c))
    async with client(ARGS.token, tools="all") as c:
        expect(await names_of(c) == FLEET_TOOLS, f"auto with all {many} tools is not the fleet view")
        r = await c.call_tool(f"{ARGS.node}__Echo", {"text": "by name"})
        expect(text_of(r).startswith("by name"), f"a namespaced call in the fleet view: {text_of(r)!r}")
    async with client(ARGS.only_read_token, tools="all") as c:
        names = await names_of(c)
        expect(names == {f"{ARGS.node}__Read"} | GATEWAY_TOOLS, f"auto with one tool is not flat: {sorted(names)}")
    async with client(ARGS.token, tools="Echo,git_*") as c:
        names = await node_tool_names(c)
        expect(names and all(n.split("__")[1] == "Echo" or n.split("__")[1].startswith("git_") for n in names),
               f"?tools=Echo,git_*: {sorted(names)}")


async def check_by_name() -> None:
    """A fleet of fifty machines over the default URL: the listing is the fleet view
    (nine tools, whatever the fleet), and each machine's tools are called by their
    namespaced names all the same, the first, the last and one in between; fleet_use
    puts machines in the listing by name (the client hears list_changed) and
    fleet_release takes them out."""
    changed = [anyio.Event()]

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed[0].set()

    async with client(ARGS.token, view="auto", message_handler=on_message) as c:
        await check_fleet_use(c, changed)
        listed = await names_of(c)
        nodes = await all_nodes(c)
        online = sorted(n["id"] for n in nodes if n.get("online"))
        expect(len(nodes) >= 50, f"{len(nodes)} nodes")
        expect(listed == FLEET_TOOLS, f"fifty machines are not the fleet view: {sorted(listed)[:20]}")
        for node in (online[0], online[len(online) // 2], online[-1]):
            r = await c.call_tool(f"{node}__Bash", {"command": f"echo by-name-{node}"})
            expect(not r.is_error and f"by-name-{node}" in text_of(r), f"{node}__Bash: {text_of(r)!r}")
        r = await fleet_call(c, online[-1], "Read", {"path": "hello.txt"})
        expect(not r.is_error and text_of(r).startswith("1\thello world"), f"fleet_call Read: {text_of(r)!r}")


async def check_by_name_small() -> None:
    """A few machines over the default URL: each one's reference tools are listed by
    namespace beside the fleet tools, `{node}__Bash` runs on every one, a tool the
    listing leaves out (`Echo`) is called by name all the same, and fleet_use lists it."""
    changed = [anyio.Event()]

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed[0].set()

    async with client(ARGS.token, message_handler=on_message) as c:
        if ARGS.mode == "legacy":
            await anyio.sleep(0.5)  # let the standalone stream open
        listed = await names_of(c)
        online = sorted(n["id"] for n in await all_nodes(c) if n.get("online") and n["id"] != ARGS.guarded)
        expect(FLEET_TOOLS <= listed and len(online) >= 1, f"default listing {sorted(listed)}")
        if len(await all_nodes(c)) == 1:
            only = {f"{online[0]}__{t}" for t in REFERENCE_TOOLS} | FLEET_TOOLS
            expect(listed == only, f"one machine's default listing {sorted(listed)}")
        for node in online:
            expect({f"{node}__{t}" for t in REFERENCE_TOOLS} <= listed, f"{node}: {sorted(listed)}")
            expect(f"{node}__Bash" in listed and f"{node}__Echo" not in listed, f"{node}: {sorted(listed)}")
            r = await c.call_tool(f"{node}__Bash", {"command": f"echo small-{node}"})
            expect(not r.is_error and f"small-{node}" in text_of(r), f"{node}__Bash: {text_of(r)!r}")
            r = await c.call_tool(f"{node}__Echo", {"text": f"unlisted-{node}"})
            expect(not r.is_error and text_of(r).startswith(f"unlisted-{node}"), f"{node}__Echo: {text_of(r)!r}")
        last = online[-1]
        got = await use_heard(c, changed, "fleet_use", {"nodes": [last]})
        expect(f"{last}__Echo" in got.get("tools", []), f"fleet_use {last}: {got}")
        expect(f"{last}__Echo" in await names_of(c), f"{last}__Echo not listed after fleet_use")
        await use_heard(c, changed, "fleet_release", {"all": True})
        expect(await names_of(c) == listed, "the listing after fleet_release is not the default one")


async def use_heard(c: Client, changed: list[anyio.Event], tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """Call fleet_use / fleet_release and wait for `notifications/tools/list_changed`
    (on the session's stream in a session, on a `subscriptions/listen` stream without)."""
    if ARGS.mode == "legacy":
        changed[0] = anyio.Event()
        r = await c.call_tool(tool, args)
        with anyio.fail_after(15):
            await changed[0].wait()
    else:
        async with c.listen(tools_list_changed=True) as sub:
            r = await c.call_tool(tool, args)
            with anyio.fail_after(15):
                async for _event in sub:
                    break
    expect(not r.is_error, f"{tool} {args}: {text_of(r)!r}")
    return r.structured_content or {}


async def check_fleet_use(c: Client, changed: list[anyio.Event]) -> None:
    """fleet_use / fleet_release at fifty machines: named and selected nodes enter the
    listing with all their tools, the cap refuses a selector of the whole fleet (and
    changes nothing), and release brings back the nine tools."""
    if ARGS.mode == "legacy":
        await anyio.sleep(0.5)  # let the standalone stream open
    expect(await names_of(c) == FLEET_TOOLS, "the fifty-machine listing before fleet_use")
    got = await use_heard(c, changed, "fleet_use", {"nodes": ["m05"]})
    expect(got.get("inUse") == ["m05"] and got.get("added") == ["m05"], f"fleet_use m05: {got}")
    listed = await names_of(c)
    m05 = {n for n in listed if n.startswith("m05__")}
    expect({"m05__Bash", "m05__Read", "m05__git_log", "m05__net_diagnose"} <= m05, f"m05's tools: {sorted(m05)}")
    expect(listed == FLEET_TOOLS | m05 and m05 == set(got.get("tools", [])), f"listing {sorted(listed)}")
    r = await c.call_tool("m05__Bash", {"command": "echo in-use"})
    expect(not r.is_error and "in-use" in text_of(r), f"m05__Bash in use: {text_of(r)!r}")
    tens = [f"m1{i}" for i in range(10)]
    got = await use_heard(c, changed, "fleet_use", {"select": "id~m1?"})
    expect(got.get("inUse") == ["m05"] + tens and got.get("added") == tens, f"fleet_use id~m1?: {got}")
    r = await c.call_tool("fleet_use", {"select": "id~m*"})
    expect(r.is_error and "too_large" in text_of(r) and "16" in text_of(r), f"over the cap: {text_of(r)!r}")
    in_use = {n.split("__")[0] for n in await names_of(c) if "__" in n}
    expect(in_use == {"m05", *tens}, f"a refused fleet_use changed the listing: {sorted(in_use)}")
    missing = await rpc_error(c.call_tool("fleet_use", {"nodes": ["nosuchnode"]}))
    expect("nosuchnode" in str(missing), f"fleet_use of a missing node: {missing!s}")
    got = await use_heard(c, changed, "fleet_release", {"nodes": ["m05"]})
    expect(got.get("released") == ["m05"] and got.get("inUse") == tens, f"fleet_release m05: {got}")
    expect(not any(n.startswith("m05__") for n in await names_of(c)), "m05 still listed after release")
    got = await use_heard(c, changed, "fleet_release", {"all": True})
    expect(got.get("inUse") == [] and got.get("released") == tens, f"fleet_release all: {got}")
    expect(await names_of(c) == FLEET_TOOLS, "the listing after releasing all")


async def check_no_leak() -> None:
    """A token that may call only NODE__Read sees only that node and only Read, in the
    flat view, the fleet view and the resources; what it may not see answers exactly
    like what does not exist."""
    tok, node = ARGS.only_read_token, ARGS.node
    async with client(tok, view="flat") as c:
        expect(await names_of(c) == {f"{node}__Read"} | GATEWAY_TOOLS, "flat listing")
        hidden = await rpc_error(c.call_tool(f"{node}__Bash", {"command": "true"}))
        missing = await rpc_error(c.call_tool(f"{node}__Nope", {}))
        other = await rpc_error(c.call_tool(f"{ARGS.guarded}__Read", {"path": "x"}))
        for e, n in ((hidden, "Bash"), (missing, "Nope")):
            expect(e.code == -32602, f"{n}: code {e.code}")
        expect(str(hidden).replace("Bash", "X") == str(missing).replace("Nope", "X"), f"{hidden!s} vs {missing!s}")
        expect(str(other).replace(f"{ARGS.guarded}__Read", "X") == str(missing).replace(f"{node}__Nope", "X"),
               f"{other!s} vs {missing!s}")
        res = await c.list_resources()
        expect({r.uri for r in res.resources} == {"gsv://nodes", f"gsv://nodes/{node}"}, f"resources {res.resources}")
        whole = json.loads((await c.read_resource("gsv://nodes")).contents[0].text)
        expect([(n["id"], n["tools"]) for n in whole["nodes"]] == [(node, ["Read"])], f"gsv://nodes: {whole}")
        one = json.loads((await c.read_resource(f"gsv://nodes/{node}")).contents[0].text)
        expect(one["tools"] == ["Read"], f"gsv://nodes/{node}: {one}")
        e1 = await rpc_error(c.read_resource(f"gsv://nodes/{ARGS.guarded}"))
        e2 = await rpc_error(c.read_resource("gsv://nodes/nosuchnode"))
        expect(e1.code == e2.code and str(e1).replace(ARGS.guarded, "X") == str(e2).replace("nosuchnode", "X"),
               f"resource of an unseen node {e1!s} vs missing {e2!s}")
    async with client(tok, view="fleet") as c:
        nodes = await all_nodes(c)
        expect([(n["id"], n["tools"]) for n in nodes] == [(node, ["Read"])], f"fleet_nodes: {nodes}")
        r = await c.call_tool("fleet_tools", {"node": node})
        expect([d["name"] for d in (r.structured_content or {}).get("tools", [])] == ["Read"], f"fleet_tools: {text_of(r)}")
        t_hidden = await rpc_error(c.call_tool("fleet_tools", {"node": node, "tools": ["Bash"]}))
        t_missing = await rpc_error(c.call_tool("fleet_tools", {"node": node, "tools": ["Nope"]}))
        expect(str(t_hidden).replace("Bash", "X") == str(t_missing).replace("Nope", "X"), f"{t_hidden!s} vs {t_missing!s}")
        n_hidden = await rpc_error(c.call_tool("fleet_tools", {"node": ARGS.guarded}))
        n_missing = await rpc_error(c.call_tool("fleet_tools", {"node": "nosuchnode"}))
        expect(str(n_hidden).replace(ARGS.guarded, "X") == str(n_missing).replace("nosuchnode", "X"),
               f"{n_hidden!s} vs {n_missing!s}")
        c_hidden = await rpc_error(fleet_call(c, node, "Bash", {"command": "true"}))
        expect(str(c_hidden) == str(hidden), f"fleet_call of a hidden tool {c_hidden!s} vs flat {hidden!s}")
        r = await fleet_call(c, node, "Read", {"path": "hello.txt"})
        expect(not r.is_error and text_of(r).startswith("1\thello world"), f"the allowed call: {text_of(r)!r}")
        # Namespaced calls in the fleet view: the allowed one runs; the rest answer
        # exactly as in the flat view, like tools that do not exist.
        r = await c.call_tool(f"{node}__Read", {"path": "hello.txt"})
        expect(not r.is_error and text_of(r).startswith("1\thello world"), f"the direct call: {text_of(r)!r}")
        d_hidden = await rpc_error(c.call_tool(f"{node}__Bash", {"command": "true"}))
        d_other = await rpc_error(c.call_tool(f"{ARGS.guarded}__Read", {"path": "x"}))
        expect(str(d_hidden) == str(hidden) and str(d_other) == str(other),
               f"direct calls in the fleet view {d_hidden!s}, {d_other!s} vs flat {hidden!s}, {other!s}")
        # fleet_use adds only what the token may call; a node it may not see answers
        # like one that does not exist.
        r = await c.call_tool("fleet_use", {"nodes": [node]})
        expect(not r.is_error and (r.structured_content or {}).get("tools") == [f"{node}__Read"], f"fleet_use: {text_of(r)}")
        expect(await names_of(c) == FLEET_TOOLS | {f"{node}__Read"}, "the listing with the node in use")
        u_hidden = await rpc_error(c.call_tool("fleet_use", {"nodes": [ARGS.guarded]}))
        u_missing = await rpc_error(c.call_tool("fleet_use", {"nodes": ["nosuchnode"]}))
        expect(str(u_hidden).replace(ARGS.guarded, "X") == str(u_missing).replace("nosuchnode", "X"),
               f"fleet_use of an unseen node {u_hidden!s} vs missing {u_missing!s}")
        r = await c.call_tool("fleet_use", {"select": f"id~{ARGS.guarded}"})
        expect(not r.is_error and (r.structured_content or {}).get("added") == [], f"select of an unseen node: {text_of(r)}")
        r = await c.call_tool("fleet_release", {"all": True})
        expect(not r.is_error and await names_of(c) == FLEET_TOOLS, f"fleet_release: {text_of(r)}")


async def check_resources() -> None:
    """gsv://nodes resources, and resources/list_changed when a node joins."""
    heard = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceListChangedNotification):
            heard.set()

    late = f"lateres-{ARGS.transport}-{ARGS.mode}"
    token = gsv_cli("token", "create", "node", late).strip()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GSV_")}
    env["RUST_LOG"] = "warn"
    node_cmd = [ARGS.gsv, "node", "--gateway", ARGS.gateway, "--id", late, "--token", token,
                "--workspace", ARGS.workspace, "--data", os.path.join(ARGS.workspace, f"{late}-data")]
    async with client(ARGS.token, view="fleet", message_handler=on_message) as c:
        res = await c.list_resources()
        uris = {r.uri for r in res.resources}
        expect({"gsv://nodes", f"gsv://nodes/{ARGS.node}", f"gsv://nodes/{ARGS.guarded}"} <= uris, f"resources {uris}")
        card = json.loads((await c.read_resource(f"gsv://nodes/{ARGS.node}")).contents[0].text)
        expect(card["id"] == ARGS.node and card["online"] is True and "Read" in card["tools"], f"card {card}")
        proc = None
        try:
            if ARGS.mode == "legacy":
                await anyio.sleep(0.5)
                proc = subprocess.Popen(node_cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
                with anyio.fail_after(15):
                    await heard.wait()
            else:
                async with c.listen(resources_list_changed=True) as sub:
                    proc = subprocess.Popen(node_cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
                    with anyio.fail_after(15):
                        async for _event in sub:
                            break
            uris = {r.uri for r in (await c.list_resources()).resources}
            expect(f"gsv://nodes/{late}" in uris, f"late node not a resource after the notification: {uris}")
        finally:
            if proc is not None:
                proc.kill()
                proc.wait()


# --- fleet_run, fleet_jobs, fleet_job ------------------------------------------------
# Nodes `run-a` (long.txt in its workspace), `run-b` (none: `cat` fails), `run-c`
# (offline) and `run-d` (its Bash denied by --run-token's policy).

RUN_SELECT = "id~run-*"
RUN_STATUSES = {"run-a": "ok", "run-b": "failed", "run-c": "offline", "run-d": "denied"}


async def fleet_run_long(c: Client, seen: list[tuple[float, float | None, str | None]]) -> types.CallToolResult:
    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    return await c.call_tool("fleet_run", {"select": RUN_SELECT, "tool": "Bash", "args": {"command": "cat long.txt"}},
                             progress_callback=on_progress)


async def check_fleet_run() -> None:
    """fleet_run over nodes with every outcome: a summary first, each node after, one
    progress notification per node, long texts cut; fleet_job reads the job back whole
    (in the other view), and another token's job reads like a missing one."""
    seen: list[tuple[float, float | None, str | None]] = []
    async with client(ARGS.run_token, view="fleet") as c:
        r = await fleet_run_long(c, seen)
    text = text_of(r)
    expect(r.is_error is False, f"a mixed run is not isError: {text!r}")
    first = text.splitlines()[0]
    expect(first.startswith("1 ok, 1 failed, 1 offline, 1 denied \u2014 job "), f"summary line {first!r}")
    job = first.rsplit(" ", 1)[-1]
    sc = r.structured_content or {}
    expect(sc.get("job") == job, f"structured job {sc.get('job')} vs {job}")
    expect(sc.get("summary") == {"ok": 1, "failed": 1, "offline": 1, "denied": 1, "skipped": 0}, f"summary {sc.get('summary')}")
    statuses = {n["node"]: n["status"] for n in sc.get("results", [])}
    expect(statuses == RUN_STATUSES, f"statuses {statuses}")
    by_node = {n["node"]: n for n in sc["results"]}
    a = by_node["run-a"]
    expect(a["ok"] is True and a.get("cut") is True and len(a["text"]) == 2000, f"run-a not cut to 2000: {len(a.get('text', ''))}")
    expect("END-OF-LONG" not in text, "the long text was not cut")
    expect(f'fleet_job {{"id": "{job}"}}' in text and "[cut: 2000 of " in text, f"no cut note: {text[-400:]!r}")
    expect(by_node["run-b"]["ok"] is False and "long.txt" in by_node["run-b"]["text"], f"run-b {by_node['run-b']}")
    expect(by_node["run-c"]["error"]["code"] == "node_offline", f"run-c {by_node['run-c']}")
    expect(by_node["run-d"]["error"]["code"] in ("forbidden", "denied"), f"run-d {by_node['run-d']}")
    for node in RUN_STATUSES:
        expect(f"\n[{node}] {RUN_STATUSES[node]}" in text, f"no block for {node}: {text!r}")
    expect(text.index("[run-a]") > text.index(" job "), "the nodes come after the summary")
    # One progress notification per node: progress counts up to 4 of 4.
    expect(sorted(m for _, _, m in seen) == sorted(f"{n}: {s}" for n, s in RUN_STATUSES.items()), f"progress {seen}")
    expect([p for p, _, _ in seen] == [1, 2, 3, 4] and all(t == 4 for _, t, _ in seen), f"progress values {seen}")

    async with client(ARGS.run_token, view="flat") as c:
        names = {t.name for t in await all_tools(c)}
        expect(GATEWAY_TOOLS <= names, f"the flat view lacks the gateway tools: {sorted(names)[:10]}")
        j = await c.call_tool("fleet_job", {"id": job})
        expect(not j.is_error, f"fleet_job: {text_of(j)[:300]!r}")
        got = j.structured_content or {}
        expect(got.get("id") == job and got.get("kind") == "fanout" and got.get("state") == "done", f"job {str(got)[:300]}")
        expect(got.get("select") == RUN_SELECT and got.get("name") == "Bash", f"job {str(got)[:300]}")
        whole = {n["node"]: n for n in got["result"]["results"]}
        expect({n: w["status"] for n, w in whole.items()} == RUN_STATUSES, f"kept statuses {whole}")
        kept = "".join(b.get("text", "") for b in whole["run-a"]["result"]["content"])
        expect("END-OF-LONG" in kept and len(kept) > 5000, f"the job does not keep run-a's whole text ({len(kept)})")
        listed = await c.call_tool("fleet_jobs", {"limit": 10})
        ids = [x["id"] for x in (listed.structured_content or {}).get("jobs", [])]
        expect(job in ids, f"fleet_jobs of its token lacks {job}: {ids}")
        bad = await c.call_tool("fleet_run", {"select": RUN_SELECT, "tool": "run-a__Bash"})
        expect(bad.is_error is True and text_of(bad).startswith("invalid_args:"), f"a namespaced tool: {text_of(bad)!r}")

    async with client(ARGS.other_token, view="fleet") as c:
        theirs = await c.call_tool("fleet_job", {"id": job})
        missing = await c.call_tool("fleet_job", {"id": "0" * 32})
        expect(theirs.is_error is True and text_of(theirs).startswith("not_found:"), f"another token's job: {text_of(theirs)!r}")
        expect(text_of(theirs).replace(job, "X") == text_of(missing).replace("0" * 32, "X"),
               f"another token's job {text_of(theirs)!r} vs a missing one {text_of(missing)!r}")
        listed = await c.call_tool("fleet_jobs", {})
        ids = [x["id"] for x in (listed.structured_content or {}).get("jobs", [])]
        expect(job not in ids, f"another token lists {job}")

    async with client(ARGS.admin_token, view="flat") as c:
        listed = await c.call_tool("fleet_jobs", {"limit": 500})
        ids = [x["id"] for x in (listed.structured_content or {}).get("jobs", [])]
        expect(job in ids, f"the admin does not list {job}")
        j = await c.call_tool("fleet_job", {"id": job})
        expect(not j.is_error, f"the admin reads the job: {text_of(j)[:200]!r}")


async def check_fleet_run_cancel() -> None:
    """A cancelled fleet_run cancels its node calls: the commands are killed."""
    tag = f"{ARGS.transport}-{ARGS.mode}"
    cmd = f"echo $$ > run-cancel-{tag}.pid; exec sleep 60"
    async with client(ARGS.run_token, view="fleet") as c:
        with anyio.move_on_after(3):
            await c.call_tool("fleet_run", {"select": "id~run-a", "tool": "Bash", "args": {"command": cmd}})
            raise CheckFailed("the run finished instead of being cancelled")
    pidfile = os.path.join(ARGS.run_workspace, f"run-cancel-{tag}.pid")
    expect(os.path.exists(pidfile), "the command never started")
    with open(pidfile) as f:
        pid = int(f.read().strip())
    deadline = time.monotonic() + 10
    while pid_alive(pid) and time.monotonic() < deadline:
        await anyio.sleep(0.1)
    expect(not pid_alive(pid), f"process {pid} still runs after fleet_run was cancelled")


CHECKS = {
    "list": check_list,
    "read": check_read,
    "bash-progress": check_bash_progress,
    "tool-error": check_tool_error,
    "offline": check_offline,
    "hidden": check_hidden,
    "unauthorized": check_unauthorized,
    "cancel": check_cancel,
    "elicit": check_elicit,
    "elicit-plan": check_elicit_plan,
    "no-self-approval": check_no_self_approval,
    "guard-operator": check_guard_operator,
    "operator-queue": check_operator_queue,
    "list-changed": check_list_changed,
    "fleet-list": check_fleet_list,
    "fleet-nodes": check_fleet_nodes,
    "fleet-tools": check_fleet_tools,
    "fleet-call": check_fleet_call,
    "fleet-progress": check_fleet_progress,
    "fleet-cancel": check_fleet_cancel,
    "fleet-elicit": check_fleet_elicit,
    "fleet-operator-queue": check_fleet_operator_queue,
    "fleet-guard": check_fleet_guard,
    "select": check_select,
    "view-override": check_view_override,
    "auto-threshold": check_auto_threshold,
    "by-name": check_by_name,
    "by-name-small": check_by_name_small,
    "no-leak": check_no_leak,
    "resources": check_resources,
    "fleet-run": check_fleet_run,
    "fleet-run-cancel": check_fleet_run_cancel,
}


async def main() -> int:
    failed = 0
    for name in ARGS.checks:
        started = time.monotonic()
        try:
            with anyio.fail_after(25):
                await CHECKS[name]()
            print(f"PASS {name} ({time.monotonic() - started:.1f}s)", flush=True)
        except BaseException as e:  # noqa: BLE001 - report every failure, keep going
            failed += 1
            cause = root_cause(e)
            detail = "".join(traceback.format_exception(type(cause), cause, cause.__traceback__))
            print(f"FAIL {name}: {cause!r}\n{detail}", flush=True)
    print(f"{len(ARGS.checks) - failed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--transport", choices=["http", "stdio"], required=True)
    p.add_argument("--mode", choices=["legacy", "auto"], required=True)
    p.add_argument("--url", required=True, help="the /mcp URL")
    p.add_argument("--gateway", required=True, help="the gateway's base URL")
    p.add_argument("--gsv", required=True, help="the gsv binary")
    p.add_argument("--data", required=True, help="the gateway's data directory")
    p.add_argument("--empty-data", required=True, help="a data directory with no tokens (for gsv mcp)")
    p.add_argument("--workspace", required=True, help="the workspace of the online node")
    p.add_argument("--token", required=True, help="an agent token allowed everything")
    p.add_argument("--limited-token", required=True, help="allow NODE__*, deny NODE__Bash")
    p.add_argument("--confirm-token", required=True, help="allow *, confirm NODE__Echo")
    p.add_argument("--self-confirm-token", required=True,
                   help="allow *, confirm NODE__Echo, NODE__Write and GUARDED__Bash, --self-confirm")
    p.add_argument("--only-read-token", required=True, help="allow NODE__Read only")
    p.add_argument("--fleet-token", required=True, help="allow *, --mcp-view fleet")
    p.add_argument("--guarded", required=True, help="a node run with --approve-shell 'echo .*'")
    p.add_argument("--node", required=True)
    p.add_argument("--offline-node", required=True)
    p.add_argument("--default-view", choices=["flat", "fleet", "auto"],
                   help="the view a check asks for when it names none (default: none, the token's)")
    p.add_argument("--run-token", help="allow *, deny run-d__Bash (fleet-run checks)")
    p.add_argument("--other-token", help="allow *, another token (fleet-run checks)")
    p.add_argument("--admin-token", help="the admin token (fleet-run checks)")
    p.add_argument("--run-workspace", help="run-a's workspace (fleet-run checks)")
    p.add_argument("checks", nargs="+", choices=sorted(CHECKS))
    ARGS = p.parse_args()
    sys.exit(anyio.run(main))
