// gsv console: a single-page app over /ui/api, no framework, no build step.
//
// Safety rules of this file: every string that came from the gateway (and so maybe
// from an agent or a node) reaches the page as text only: through el()'s children
// (document.createTextNode) or .textContent. Nothing here assigns innerHTML,
// outerHTML or uses insertAdjacentHTML / document.write. And every such string is
// drawn by the one display rule (shown, shownBlock, argsView below): add() puts each
// string child through shown(), so a bidi override or a zero-width character shows as
// a marked escape and a long value is cut with a visible count; raw() is only for our
// own text.
//
// Every request carries the session's CSRF token (reads too: some make calls on
// nodes), which the gateway puts into the app's HTML (<meta name="gsv-csrf">).
"use strict";

const CSRF = (document.querySelector("meta[name=\"gsv-csrf\"]") || {}).content || "";

const state = {
  me: null,
  page: null,
  refresh: null,
  timer: null,
  pendingSeen: new Set(),
  pendingKnown: false,
};
window.gsvTimings = {};

// ---- DOM helpers -------------------------------------------------------------

/** An element with properties and children; string children become text nodes. */
function el(tag, props, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") add(e, String(v));
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(e.dataset, v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  return add(e, kids);
}

/** Appends children (arrays flattened) to `parent`; strings as text, by the display
 * rule (shown). */
function add(parent, ...kids) {
  for (const kid of kids.flat(Infinity)) {
    if (kid === undefined || kid === null || kid === false) continue;
    parent.appendChild(kid instanceof Node ? kid : shown(String(kid)));
  }
  return parent;
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

function when(ms) {
  if (!ms) return "";
  return new Date(ms).toLocaleString();
}

function ago(ms) {
  if (!ms) return "";
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 60) return s + "s ago";
  if (s < 3600) return Math.round(s / 60) + "m ago";
  if (s < 86400) return Math.round(s / 3600) + "h ago";
  return Math.round(s / 86400) + "d ago";
}

function left(ms) {
  const s = Math.max(0, Math.round((ms - Date.now()) / 1000));
  return Math.floor(s / 60) + ":" + String(s % 60).padStart(2, "0");
}

/** A value as indented JSON, drawn as a block by the display rule. */
function jsonBlock(value) {
  return shownBlock(JSON.stringify(value === undefined ? null : value, null, 2));
}

let toastTimer = null;
function toast(message, error) {
  const t = document.getElementById("toast");
  add(clear(t), message);
  t.className = error ? "toast error" : "toast";
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.hidden = true; }, 5000);
}

// ---- the display rule ------------------------------------------------------------
//
// protocol/src/display.rs, the one rule for text a person reads: every character in
// its HIDDEN table (controls, bidi embeddings/overrides/isolates, zero-width and other
// invisible characters) is drawn as a visible, marked escape (`\u{202e}` in a
// <span class="esc">), never as itself; a long value is cut with a visible
// "…(+N more characters)" count and a "show all" button. The gateway puts its table
// here when it serves this file: one list, in Rust.
const HIDDEN = /*GSV_HIDDEN*/[];
const MAX_TEXT = 2000;   // an ordinary field
const MAX_ARG = 4000;    // one value in the arguments block
const MAX_BLOCK = 20000; // an output, log, plan or JSON block

const HIDDEN_RE = new RegExp("[\\u{0}-\\u{1f}\\u{7f}-\\u{9f}" +
  HIDDEN.map(([lo, hi]) => "\\u{" + lo.toString(16) + "}-\\u{" + hi.toString(16) + "}").join("") + "]", "u");

function isHidden(cp) {
  if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) return true; // char::is_control
  for (const [lo, hi] of HIDDEN) {
    if (cp < lo) return false;
    if (cp <= hi) return true;
  }
  return false;
}

/** The visible escape of a hidden character, as display.rs writes it. */
function escapeOf(cp) {
  if (cp === 0x0a) return "\\n";
  if (cp === 0x0d) return "\\r";
  if (cp === 0x09) return "\\t";
  if (cp < 0x100) return "\\x" + cp.toString(16).padStart(2, "0");
  return "\\u{" + cp.toString(16).padStart(4, "0") + "}";
}

/** Our own text, as it is (structure around gateway strings: never gateway data). */
function raw(text) {
  return document.createTextNode(text);
}

/** Appends `chars` (code points) to `parent`: hidden ones as marked escapes; with
 * `block`, newlines and tabs stay line breaks; with `quote`, `"` and `\` are escaped as
 * in JSON (a value cannot seem to end early). */
function draw(parent, chars, block, quote) {
  let run = "";
  const flush = () => { if (run) { parent.appendChild(raw(run)); run = ""; } };
  for (const ch of chars) {
    const cp = ch.codePointAt(0);
    if (block && (ch === "\n" || ch === "\t")) { run += ch; continue; }
    if (isHidden(cp)) {
      flush();
      const mark = document.createElement("span");
      mark.className = "esc";
      mark.textContent = escapeOf(cp);
      parent.appendChild(mark);
      continue;
    }
    run += quote && (ch === "\"" || ch === "\\") ? "\\" + ch : ch;
  }
  flush();
}

/** The marker after a cut value: `…(+N more characters)` (display.rs `more_marker`). */
function moreMarker(n) {
  return "…(+" + n + " more characters)";
}

/** `text` as a person should read it: cut to `max` characters (code points, as Rust
 * counts them) with the marker and a "show all" button, hidden characters escaped and
 * marked. Options: `block` (keep line breaks), `quote` (JSON string escapes). */
function shownNode(text, max, opts) {
  const s = String(text);
  const o = opts || {};
  if (!o.block && !o.quote && s.length <= max && !HIDDEN_RE.test(s)) return raw(s);
  const chars = Array.from(s);
  const box = document.createElement("span");
  box.className = "shown";
  const render = (all) => {
    clear(box);
    const cut = !all && chars.length > max;
    draw(box, cut ? chars.slice(0, max) : chars, o.block, o.quote);
    if (cut) {
      box.appendChild(el("span", { class: "more" }, moreMarker(chars.length - max)));
      box.appendChild(raw(" "));
      box.appendChild(el("button", { type: "button", class: "show-all", onclick: () => render(true) }, "show all"));
    }
  };
  render(false);
  return box;
}

/** An ordinary field. */
function shown(text, max) {
  return shownNode(text, max || MAX_TEXT);
}

/** An output, log, plan or pretty-printed JSON block: line breaks and tabs kept. */
function shownBlock(text, max) {
  return shownNode(text, max || MAX_BLOCK, { block: true });
}

/** Plain text for places that take no markup (browser notifications). */
function plain(text, max) {
  const chars = Array.from(String(text));
  const head = chars.slice(0, max).map((ch) => isHidden(ch.codePointAt(0)) ? escapeOf(ch.codePointAt(0)) : ch).join("");
  return chars.length > max ? head + moreMarker(chars.length - max) : head;
}

/** JSON text as tokens (`p` punctuation, `s` a string's value, `l` a literal, kept as
 * written: a number is never rounded); `null` when it is not JSON. */
function jsonTokens(text) {
  const out = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === " " || c === "\n" || c === "\r" || c === "\t") { i++; continue; }
    if ("{}[],:".includes(c)) { out.push({ p: c }); i++; continue; }
    if (c === "\"") {
      let j = i + 1;
      while (j < text.length && text[j] !== "\"") j += text[j] === "\\" ? 2 : 1;
      if (j >= text.length) return null;
      try { out.push({ s: JSON.parse(text.slice(i, j + 1)) }); } catch (_) { return null; }
      i = j + 1;
      continue;
    }
    let j = i;
    while (j < text.length && !" \n\r\t{}[],:\"".includes(text[j])) j++;
    out.push({ l: text.slice(i, j) });
    i = j;
  }
  return out;
}

/** The arguments block: the call's JSON indented, every key and value shown by the
 * display rule, each value cut on its own (a long one never hides those after it). */
function argsView(text) {
  const tokens = jsonTokens(String(text));
  if (!tokens) return shownBlock(text);
  const box = document.createElement("span");
  let depth = 0;
  const line = () => raw("\n" + "  ".repeat(depth));
  tokens.forEach((t, i) => {
    const next = tokens[i + 1] || {};
    if (t.p === "{" || t.p === "[") {
      const close = t.p === "{" ? "}" : "]";
      if (next.p === close) { box.appendChild(raw(t.p)); return; }
      depth++;
      add(box, raw(t.p), line());
    } else if (t.p === "}" || t.p === "]") {
      const prev = tokens[i - 1] || {};
      if (prev.p === "{" || prev.p === "[") { box.appendChild(raw(t.p)); return; }
      depth = Math.max(0, depth - 1);
      add(box, line(), raw(t.p));
    } else if (t.p === ",") {
      add(box, raw(","), line());
    } else if (t.p === ":") {
      box.appendChild(raw(": "));
    } else if (t.s !== undefined) {
      const key = next.p === ":";
      add(box, raw("\""), shownNode(t.s, key ? MAX_TEXT : MAX_ARG, { quote: true }), raw("\""));
    } else {
      box.appendChild(shown(t.l));
    }
  });
  return box;
}

// ---- API ---------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(path, options, again) {
  const opts = Object.assign({ credentials: "same-origin" }, options || {});
  opts.headers = { "x-csrf-token": CSRF };
  if (opts.method === "POST" && opts.body !== undefined) {
    opts.headers["content-type"] = "application/json";
    opts.body = JSON.stringify(opts.body);
  }
  const res = await fetch("/ui/api/" + path, opts);
  let body = null;
  try { body = await res.json(); } catch (_) { body = null; }
  if (!res.ok) {
    const err = (body && body.error) || {};
    const rule = err.details && err.details.rule;
    // Another page on this host planted a console cookie: the gateway refused the
    // request (nothing done) and cleared that cookie; once more.
    if (rule === "two_cookies" && !again) return api(path, options, true);
    if (res.status === 401) signedOut();
    throw new ApiError(res.status, err.code || "http_" + res.status, err.message || res.statusText);
  }
  return body;
}

function post(path, body) {
  return api(path, { method: "POST", body: body === undefined ? {} : body });
}

function signedOut() {
  const main = clear(document.getElementById("main"));
  main.appendChild(el("div", { class: "signed-out" },
    el("h1", {}, "Signed out"),
    el("p", {}, "Your console session ended (signed out, expired, or its token was revoked). Run"),
    el("pre", {}, raw("gsv ui --open")),
    el("p", {}, "for a new one-time login link.")));
}

function failed(where, e) {
  where.appendChild(el("p", { class: "bad" }, "Error: " + (e.code || "") + ": " + e.message));
}

// ---- pages -------------------------------------------------------------------

const pages = {};

// Nodes: one page of up to 250 rows, filtered on the gateway; drawn in one fragment.
pages.nodes = {
  topics: ["nodes"],
  mount(main) {
    let offset = 0;
    const q = el("input", { type: "search", id: "nodes-q", placeholder: "filter: id or label (key=value)" });
    const sel = el("input", { type: "text", id: "nodes-select", placeholder: "selector: role=web,fact.os=linux" });
    const count = el("span", { class: "muted", id: "nodes-count" });
    const body = el("tbody");
    const pager = el("div", { class: "pager" });
    const errors = el("div");
    add(main,
      el("h1", {}, "Nodes"),
      el("div", { class: "bar" }, q, sel, count),
      errors,
      el("table", { id: "nodes" },
        el("thead", {}, el("tr", {}, ["Node", "State", "Labels", "Host", "Tools", "Version", "Since"].map((h) => el("th", {}, h)))),
        body),
      pager);
    let debounce = null;
    const refresh = async () => {
      const params = new URLSearchParams({ offset: String(offset), limit: "250" });
      if (q.value.trim()) params.set("q", q.value.trim());
      if (sel.value.trim()) params.set("select", sel.value.trim());
      let page;
      try {
        page = await api("nodes?" + params);
      } catch (e) {
        clear(errors); failed(errors, e); return;
      }
      clear(errors);
      const frag = document.createDocumentFragment();
      for (const n of page.nodes) {
        const rt = n.runtime || {};
        frag.appendChild(el("tr", { class: "node", dataset: { node: n.id } },
          el("td", {}, el("a", { class: "node-link", href: "#/nodes/" + encodeURIComponent(n.id) }, n.id)),
          el("td", {}, el("span", { class: n.online ? "dot on" : "dot" }), n.online ? "online" : "offline"),
          el("td", {}, Object.entries(n.labels || {}).map(([k, v]) => el("span", { class: "label" }, k + "=" + v))),
          el("td", {}, [rt.hostOs, rt.hostArch].filter(Boolean).join("/")),
          el("td", {}, String((n.tools || []).length)),
          el("td", { class: "mono" }, n.version || ""),
          el("td", { title: when(n.since) }, ago(n.since))));
      }
      clear(body).appendChild(frag);
      if (!page.nodes.length) body.appendChild(el("tr", {}, el("td", { colspan: "7", class: "muted" }, "No nodes match.")));
      count.textContent = page.total + " nodes, " + page.online + " online";
      clear(pager);
      if (page.total > page.nodes.length) {
        add(pager,
          el("button", { type: "button", disabled: offset === 0, onclick: () => { offset = Math.max(0, offset - 250); refresh(); } }, "Previous"),
          el("span", { class: "muted" }, (offset + 1) + "–" + (offset + page.nodes.length) + " of " + page.total),
          el("button", { type: "button", disabled: offset + page.nodes.length >= page.total, onclick: () => { offset += 250; refresh(); } }, "Next"));
      }
      if (!window.gsvTimings.nodesDrawn) window.gsvTimings.nodesDrawn = performance.now();
      window.gsvTimings.nodesRows = page.nodes.length;
    };
    const later = () => { clearTimeout(debounce); debounce = setTimeout(() => { offset = 0; refresh(); }, 200); };
    q.addEventListener("input", later);
    sel.addEventListener("input", later);
    return refresh;
  },
};

// One node: its facts and every tool with its description and input schema.
pages.node = {
  topics: ["nodes"],
  mount(main, id) {
    const box = el("section", { id: "node-detail" });
    add(main, el("p", {}, el("a", { href: "#/nodes" }, "← Nodes")), box);
    return async () => {
      let d;
      try { d = await api("nodes/" + encodeURIComponent(id)); } catch (e) { clear(box); failed(box, e); return; }
      const n = d.node, rt = n.runtime || {};
      add(clear(box), 
        el("h1", {}, el("span", { class: n.online ? "dot on" : "dot" }), n.id),
        el("dl", { class: "kv" },
          el("dt", {}, "State"), el("dd", {}, (n.online ? "online since " : "offline since ") + when(n.since)),
          el("dt", {}, "Host"), el("dd", {}, [rt.hostOs, rt.hostArch].filter(Boolean).join("/")),
          el("dt", {}, "Role"), el("dd", {}, String(n.hostRole || "")),
          el("dt", {}, "Address"), el("dd", { class: "mono" }, n.remoteAddr || ""),
          el("dt", {}, "Version"), el("dd", { class: "mono" }, n.version || ""),
          el("dt", {}, "Labels"), el("dd", {}, Object.entries(n.labels || {}).map(([k, v]) => el("span", { class: "label" }, k + "=" + v))),
          el("dt", {}, "Facts"), el("dd", { class: "mono" }, Object.entries(rt.facts || {}).map(([k, v]) => k + "=" + v).join("  ")),
          el("dt", {}, "Binaries"), el("dd", { class: "mono bins" }, Object.entries(rt.hostBinStatus || {}).map(([b, ok]) => b + (ok ? " \u2713" : " missing")).join("  "))),
        el("h2", {}, d.tools.length + " tools"),
        d.tools.map((t) => el("div", { class: "card tool", dataset: { tool: t.name } },
          el("h3", {}, el("span", { class: "tool-name mono" }, n.id + "__" + t.name), " ",
            el("span", { class: "muted" }, t.capability),
            t.needsApproval ? el("span", { class: "label" }, "needs approval") : null,
            t.unaccepted ? el("span", { class: "label" }, "not accepted") : null),
          el("div", { class: "desc tool-desc" }, t.description || ""),
          el("details", {}, el("summary", {}, "Input schema"),
            el("pre", { class: "schema" }, jsonBlock(t.inputSchema))))));
    };
  },
};

// Every argument of a waiting call; over 64 KiB the list leaves them out and they are
// asked for (once per request) from approvals/{id}/args.
const argsCache = new Map();
function argsBox(a) {
  const box = el("pre", { class: "args" });
  if (typeof a.args === "string") return add(box, argsView(a.args));
  add(box, raw("(loading every argument…)"));
  let text = argsCache.get(a.id);
  if (!text) {
    text = api("approvals/" + encodeURIComponent(a.id) + "/args").then((r) => r.args);
    argsCache.set(a.id, text);
    text.catch(() => argsCache.delete(a.id));
  }
  text.then((t) => add(clear(box), argsView(t)),
    (e) => add(clear(box), "Arguments not available here (" + e.code + ": " + e.message + "); the summary above names every one."));
  return box;
}

// Approvals: pending requests with every argument the gateway keeps, a countdown to
// expiry, approve / deny; then the recent decided ones.
pages.approvals = {
  topics: ["approvals"],
  mount(main, focus) {
    const pending = el("div", { id: "pending" });
    const recent = el("tbody");
    add(main, el("h1", {}, "Approvals"), pending,
      el("h2", {}, "Recent"),
      el("table", { id: "recent-approvals" },
        el("thead", {}, el("tr", {}, ["Request", "Agent", "Call", "State", "Decided by", "When"].map((h) => el("th", {}, h)))),
        recent));
    let focused = false;
    return async () => {
      let open, all;
      try {
        [open, all] = await Promise.all([api("approvals?limit=200"), api("approvals?all=true&limit=50")]);
      } catch (e) { clear(pending); failed(pending, e); return; }
      clear(pending);
      if (!open.approvals.length) pending.appendChild(el("p", { class: "empty" }, "No call is waiting for approval."));
      for (const a of open.approvals) {
        const decide = async (decision, button) => {
          button.disabled = true;
          try {
            const r = await post("approvals/" + encodeURIComponent(a.id), { decision });
            toast(r.state + ": " + r.summary);
          } catch (e) { toast(e.code + ": " + e.message, true); }
          state.refresh && state.refresh();
        };
        const canDecide = state.me && state.me.canDecide;
        const card = el("div", { class: "card approval" + (focus === a.id ? " focus" : ""), id: "approval-" + a.id, dataset: { id: a.id } },
          el("h3", {}, el("span", { class: "summary mono" }, a.summary)),
          el("dl", { class: "kv" },
            el("dt", {}, "Agent"), el("dd", { class: "agent" }, a.agent),
            el("dt", {}, "Node"), el("dd", { class: "mono" }, a.node),
            a.nodes && a.nodes.length ? [el("dt", {}, "Nodes"), el("dd", { class: "mono" }, a.nodes.length + ": " + a.nodes.join(", "))] : null,
            el("dt", {}, "Tool"), el("dd", { class: "mono" }, a.tool),
            el("dt", {}, "Why"), el("dd", {}, a.reason),
            el("dt", {}, "Arguments hash"), el("dd", { class: "mono" }, a.argsHash),
            el("dt", {}, "Asked"), el("dd", {}, when(a.createdAt)),
            el("dt", {}, "Expires in"), el("dd", {}, el("span", { class: "countdown", dataset: { expires: String(a.expiresAt) } }, left(a.expiresAt)))),
          el("div", { class: "muted" }, "Arguments (every one, as the call will run):"), argsBox(a),
          a.plan ? [el("div", { class: "muted" }, "Plan (from the node):"), el("pre", { class: "plan" }, shownBlock(a.plan))] : null,
          el("div", { class: "actions" },
            el("button", { type: "button", class: "approve", disabled: !canDecide, onclick: (ev) => decide("approve", ev.target) }, "Approve"),
            el("button", { type: "button", class: "deny", disabled: !canDecide, onclick: (ev) => decide("deny", ev.target) }, "Deny")));
        pending.appendChild(card);
        if (focus === a.id && !focused) { focused = true; card.scrollIntoView({ block: "center" }); }
      }
      const frag = document.createDocumentFragment();
      for (const a of all.approvals.filter((x) => x.state !== "pending")) {
        frag.appendChild(el("tr", { dataset: { id: a.id } },
          el("td", { class: "mono" }, a.id),
          el("td", {}, a.agent),
          el("td", { class: "mono" }, a.summary),
          el("td", { class: "state-" + a.state }, a.state),
          el("td", {}, a.decidedBy || ""),
          el("td", {}, when(a.decidedAt || a.createdAt))));
      }
      clear(recent).appendChild(frag);
    };
  },
};

// Sessions: every node's background processes; log tail and kill.
pages.sessions = {
  topics: ["sessions"],
  mount(main) {
    const body = el("tbody");
    const errors = el("div");
    const log = el("div", { id: "session-log" });
    add(main, el("h1", {}, "Sessions"), errors,
      el("table", { id: "sessions" },
        el("thead", {}, el("tr", {}, ["Node", "Session", "Status", "Pid", "Command", "Started", ""].map((h) => el("th", {}, h)))),
        body), log);
    const showLog = async (node, id) => {
      add(clear(log), el("h2", {}, "Log of " + node + " / " + id));
      try {
        const r = await api("sessions/" + encodeURIComponent(node) + "/" + encodeURIComponent(id) + "/log?limit=200");
        const text = (r.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
        log.appendChild(el("pre", { class: "log" }, shownBlock(text)));
      } catch (e) { failed(log, e); }
    };
    return async () => {
      let page;
      try { page = await api("sessions"); } catch (e) { clear(errors); failed(errors, e); return; }
      clear(errors);
      for (const f of page.errors || []) errors.appendChild(el("p", { class: "bad" }, f.node + ": " + f.error));
      const frag = document.createDocumentFragment();
      for (const s of page.sessions) {
        const running = s.status === "running";
        frag.appendChild(el("tr", { class: "session", dataset: { node: s.node, session: s.sessionId, status: s.status } },
          el("td", { class: "mono" }, s.node),
          el("td", { class: "mono" }, s.sessionId),
          el("td", { class: running ? "ok" : "muted" }, s.status + (s.exitCode !== null && s.exitCode !== undefined ? " (" + s.exitCode + ")" : "")),
          el("td", {}, String(s.pid)),
          el("td", { class: "mono command" }, s.command),
          el("td", {}, ago(s.startedAt)),
          el("td", {},
            el("button", { type: "button", class: "log-button", onclick: () => showLog(s.node, s.sessionId) }, "Log"), " ",
            running ? el("button", {
              type: "button", class: "kill", disabled: !(state.me && state.me.canManage),
              onclick: async (ev) => {
                ev.target.disabled = true;
                try {
                  await post("sessions/" + encodeURIComponent(s.node) + "/" + encodeURIComponent(s.sessionId) + "/kill");
                  toast("killed " + s.sessionId);
                } catch (e) { toast(e.code + ": " + e.message, true); }
                state.refresh && state.refresh();
              },
            }, "Kill") : null)));
      }
      clear(body).appendChild(frag);
      if (!page.sessions.length) body.appendChild(el("tr", {}, el("td", { colspan: "7", class: "muted" }, "No background sessions.")));
    };
  },
};

// Audit: newest first, a text filter, older pages, and the chain's verification.
pages.audit = {
  topics: [],
  mount(main) {
    const q = el("input", { type: "search", id: "audit-q", placeholder: "filter: actor, node, tool, outcome, detail" });
    const verify = el("span", { id: "audit-verify", class: "muted" }, "checking the chain…");
    const body = el("tbody");
    const more = el("div", { class: "pager" });
    add(main, el("h1", {}, "Audit"), el("div", { class: "bar" }, q,
      el("button", { type: "button", id: "audit-verify-button", onclick: () => check() }, "Verify chain"), verify),
      el("table", { id: "audit" },
        el("thead", {}, el("tr", {}, ["#", "Time", "Kind", "Actor", "Target", "Outcome", "Detail"].map((h) => el("th", {}, h)))),
        body), more);
    const check = async () => {
      add(clear(verify), "checking the chain…");
      try {
        const r = await api("audit?limit=1&verify=true");
        const v = r.verify;
        const c = v.cluster;
        const own = v.firstBadSeq ? "CHAIN BROKEN at row " + v.firstBadSeq + ": " + v.problem : "chain verifies: " + v.rows + " rows";
        const cluster = !c ? "" : c.ok ? " · cluster chain verifies: " + c.rows + " rows" : " · CLUSTER CHAIN BROKEN at row " + c.firstBadSeq + ": " + c.problem;
        add(clear(verify), own + cluster);
        verify.className = v.ok ? "ok" : "bad";
      } catch (e) { add(clear(verify), e.message); verify.className = "bad"; }
    };
    const row = (r) => el("tr", { dataset: { seq: String(r.seq) } },
      el("td", {}, String(r.seq)),
      el("td", { class: "time" }, when(r.ts)),
      el("td", {}, r.kind),
      el("td", { class: "mono" }, r.actor),
      el("td", { class: "mono" }, r.node && r.tool ? r.node + "__" + r.tool : (r.node || "")),
      el("td", {}, r.outcome + (r.durationMs !== null && r.durationMs !== undefined ? " (" + r.durationMs + " ms)" : "")),
      el("td", { class: "mono" }, r.detail || ""));
    const load = async (before) => {
      const params = new URLSearchParams({ limit: "100" });
      if (before) params.set("before", String(before));
      if (q.value.trim()) params.set("q", q.value.trim());
      const r = await api("audit?" + params);
      if (!before) clear(body);
      const frag = document.createDocumentFragment();
      r.rows.forEach((x) => frag.appendChild(row(x)));
      body.appendChild(frag);
      clear(more);
      if (r.rows.length === 100) {
        const last = r.rows[r.rows.length - 1].seq;
        more.appendChild(el("button", { type: "button", onclick: () => load(last) }, "Older"));
      }
    };
    let debounce = null;
    q.addEventListener("input", () => { clearTimeout(debounce); debounce = setTimeout(() => load(), 250); });
    check();
    return () => load().catch((e) => failed(body, e));
  },
};

// Tokens: the list, a form for agent tokens (shown once), revoke in two clicks.
pages.tokens = {
  topics: ["tokens"],
  mount(main) {
    const manage = state.me && state.me.canManage;
    let confirming = null;
    const body = el("tbody");
    const shown = el("div", { id: "new-token-secret" });
    const field = (id, label, hint) => [el("label", { for: id }, label), el("input", { id, type: "text", placeholder: hint })];
    const form = el("form", { id: "new-token", class: "grid" },
      field("tok-name", "Agent name", "e.g. ci-bot"),
      field("tok-allow", "Allow", "globs, comma-separated: *__Read, lab__*"),
      field("tok-deny", "Deny", "globs"),
      field("tok-confirm", "Confirm", "globs that need an operator's approval"),
      el("span"), el("button", { type: "submit", class: "primary", disabled: !manage }, "Create agent token"));
    const globs = (id) => document.getElementById(id).value.split(",").map((s) => s.trim()).filter(Boolean);
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      try {
        const r = await post("tokens", {
          name: document.getElementById("tok-name").value,
          allow: globs("tok-allow"), deny: globs("tok-deny"), confirm: globs("tok-confirm"),
        });
        add(clear(shown), el("p", {}, "New token " + r.id + " (shown once: copy it now):"),
          el("div", { class: "secret mono", id: "new-token-value" }, r.token));
        form.reset();
      } catch (e) { toast(e.code + ": " + e.message, true); }
      state.refresh && state.refresh();
    });
    add(main, el("h1", {}, "Tokens"),
      manage ? [el("div", { class: "card" }, el("h3", {}, "New agent token"), form, shown)] : null,
      el("table", { id: "tokens" },
        el("thead", {}, el("tr", {}, ["Id", "Kind", "Subject", "Policy", "Created", "State", ""].map((h) => el("th", {}, h)))),
        body));
    return async () => {
      let r;
      try { r = await api("tokens"); } catch (e) { failed(body, e); return; }
      const frag = document.createDocumentFragment();
      for (const t of r.tokens) {
        const p = t.policy;
        const policy = p ? ["allow=" + p.allow.join(","), p.deny.length ? "deny=" + p.deny.join(",") : "", p.confirm.length ? "confirm=" + p.confirm.join(",") : ""].filter(Boolean).join("  ") : "";
        const live = !t.revokedAt;
        const cell = el("td");
        const askCell = () => {
          add(clear(cell), el("button", { type: "button", class: "revoke", onclick: () => { confirming = t.id; confirmCell(); } }, "Revoke"));
        };
        // The question survives the list being refreshed under it (live updates).
        const confirmCell = () => {
          add(clear(cell), el("button", { type: "button", class: "revoke-confirm", onclick: async (ev) => {
            ev.target.disabled = true;
            confirming = null;
            try { await post("tokens/" + encodeURIComponent(t.id) + "/revoke"); toast("revoked " + t.id); } catch (e) { toast(e.code + ": " + e.message, true); }
            state.refresh && state.refresh();
          } }, "Really revoke " + t.id + "?"), " ", el("button", { type: "button", class: "revoke-cancel", onclick: () => { confirming = null; askCell(); } }, "Cancel"));
        };
        if (live && manage) {
          if (confirming === t.id) confirmCell(); else askCell();
        }
        frag.appendChild(el("tr", { class: "token", dataset: { id: t.id, state: live ? "active" : "revoked" } },
          el("td", { class: "mono" }, t.id), el("td", {}, t.kind), el("td", {}, t.subject),
          el("td", { class: "mono" }, policy), el("td", {}, when(t.createdAt)),
          el("td", { class: live ? "ok" : "bad" }, live ? "active" : "revoked " + when(t.revokedAt)), cell));
      }
      clear(body).appendChild(frag);
    };
  },
};

// Jobs: newest first; one job's result or error.
pages.jobs = {
  topics: ["jobs"],
  mount(main, id) {
    const body = el("tbody");
    const detail = el("div", { id: "job-detail" });
    add(main, el("h1", {}, "Jobs"), detail,
      el("table", { id: "jobs" },
        el("thead", {}, el("tr", {}, ["Job", "Agent", "Kind", "Call", "State", "Started", "Finished"].map((h) => el("th", {}, h)))),
        body));
    return async () => {
      let r;
      try { r = await api("jobs?limit=100"); } catch (e) { failed(body, e); return; }
      const frag = document.createDocumentFragment();
      for (const j of r.jobs) {
        frag.appendChild(el("tr", { class: "job", dataset: { id: j.id } },
          el("td", { class: "mono" }, el("a", { href: "#/jobs/" + encodeURIComponent(j.id) }, j.id.slice(0, 12))),
          el("td", {}, j.agent), el("td", {}, j.kind), el("td", { class: "mono" }, j.name + (j.select ? " (" + j.select + ")" : "")),
          el("td", { class: "state-" + j.state }, j.state), el("td", {}, when(j.createdAt)), el("td", {}, when(j.finishedAt))));
      }
      clear(body).appendChild(frag);
      if (!r.jobs.length) body.appendChild(el("tr", {}, el("td", { colspan: "7", class: "muted" }, "No jobs.")));
      if (id) {
        try {
          const j = await api("jobs/" + encodeURIComponent(id));
          add(clear(detail), el("div", { class: "card" }, el("h3", { class: "mono" }, j.id + " " + j.state),
            el("pre", {}, jsonBlock(j.error || j.result || null))));
        } catch (e) { clear(detail); failed(detail, e); }
      }
    };
  },
};

// ---- routing, live updates, notifications --------------------------------------

function route() {
  const parts = (location.hash || "#/nodes").slice(2).split("/").map(decodeURIComponent);
  let name = parts[0] || "nodes";
  let arg = parts[1];
  if (name === "nodes" && arg) name = "node";
  if (!pages[name]) { name = "nodes"; arg = undefined; }
  state.page = name;
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("active", a.dataset.page === name || (name === "node" && a.dataset.page === "nodes"));
  }
  const main = clear(document.getElementById("main"));
  const refresh = pages[name].mount(main, arg);
  state.refresh = refresh;
  refresh();
}

let pendingRefresh = null;
function changed(topic) {
  if (topic === "approvals" || topic === "all") checkPending();
  const page = pages[state.page];
  if (!page || !state.refresh) return;
  // The sessions tick asks every node (audited calls): only for a page someone sees.
  if (topic === "sessions" && document.visibilityState === "hidden") return;
  if (topic === "all" || page.topics.includes(topic)) {
    clearTimeout(pendingRefresh);
    pendingRefresh = setTimeout(() => state.refresh && state.refresh(), 150);
  }
}

function listen() {
  const live = document.getElementById("live");
  const source = new EventSource("/ui/api/events?csrf=" + encodeURIComponent(CSRF));
  source.addEventListener("open", () => { live.className = "live"; changed("all"); });
  source.addEventListener("error", () => {
    live.className = "live off";
    // A refused stream is not retried by the browser (a planted cookie, since cleared).
    if (source.readyState === EventSource.CLOSED) setTimeout(listen, 3000);
  });
  source.addEventListener("changed", (ev) => {
    let topic = "all";
    try { topic = JSON.parse(ev.data); } catch (_) { topic = "all"; }
    changed(topic);
  });
}

function notifying() {
  return localStorage.getItem("gsv.notify") === "on";
}

function beep() {
  try {
    const ctx = new AudioContext();
    const osc = ctx.createOscillator();
    const gain = ctx.createGain();
    gain.gain.value = 0.08;
    osc.connect(gain).connect(ctx.destination);
    osc.frequency.value = 880;
    osc.start();
    osc.stop(ctx.currentTime + 0.15);
  } catch (_) { /* no audio */ }
}

async function checkPending() {
  let page;
  try { page = await api("approvals?limit=200"); } catch (_) { return; }
  const badge = document.getElementById("pending-count");
  badge.textContent = String(page.total);
  badge.hidden = page.total === 0;
  const fresh = page.approvals.filter((a) => !state.pendingSeen.has(a.id));
  fresh.forEach((a) => state.pendingSeen.add(a.id));
  if (state.pendingKnown && fresh.length && notifying()) {
    beep();
    if ("Notification" in window && Notification.permission === "granted") {
      for (const a of fresh.slice(0, 3)) {
        const n = new Notification("gsv: approval requested", { body: plain(a.agent + ": " + a.summary, 300), tag: a.id });
        n.onclick = () => { window.focus(); location.hash = "#/approvals/" + encodeURIComponent(a.id); };
      }
    }
  }
  state.pendingKnown = true;
}

function tick() {
  for (const c of document.querySelectorAll(".countdown")) {
    c.textContent = left(Number(c.dataset.expires));
  }
}

async function start() {
  try {
    state.me = await api("me");
  } catch (_) {
    return;
  }
  add(clear(document.getElementById("whoami")), state.me.role + " · " + state.me.actor + " · gsv " + state.me.version);
  const notify = document.getElementById("notify");
  notify.checked = notifying();
  notify.addEventListener("change", async () => {
    if (notify.checked && "Notification" in window && Notification.permission === "default") {
      try { await Notification.requestPermission(); } catch (_) { /* ignored */ }
    }
    localStorage.setItem("gsv.notify", notify.checked ? "on" : "off");
  });
  document.getElementById("logout").addEventListener("click", async () => {
    try { await api("../logout", { method: "POST" }); } catch (_) { /* signed out anyway */ }
    signedOut();
  });
  window.addEventListener("hashchange", route);
  route();
  checkPending();
  listen();
  setInterval(tick, 1000);
}

start();
