// The Chorus console: pages rendered from /admin/api, routed by the URL hash.
// Everything stored is shown with textContent, never as HTML — but replies and summaries, whose
// Markdown render.js (ChorusRender) turns into HTML through DOMPurify, as the widget shows them.
"use strict";

const CSRF = document.querySelector('meta[name="csrf-token"]').content;
const SVG_NS = "http://www.w3.org/2000/svg";
const PART_COLORS = {
  "system prompt": "#3b4cca", summary: "#8e5bd6", memory: "#1e8e6e", recall: "#5fb89a",
  documents: "#d08a00", history: "#7f8bd6", attachments: "#e0637a",
};
const LANES = { web: "W", telegram: "T", discord: "D", terminal: ">" };
// What each kind of stored event is called before its text (persona switches and notes say it themselves).
const EVENT_LABELS = { command: "command: ", command_reply: "command reply: ", error: "error: " };
const page = document.getElementById("page");

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  for (const child of children) node.append(child);
  return node;
}

async function api(path, options = {}) {
  const headers = { Accept: "application/json", ...(options.headers || {}) };
  if (options.method && options.method !== "GET") headers["X-CSRF-Token"] = CSRF;
  if (options.json !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch("/admin/api" + path, {
    method: options.method || "GET",
    headers,
    body: options.json !== undefined ? JSON.stringify(options.json) : undefined,
    credentials: "same-origin",
  });
  if (response.status === 401) { location.href = "/admin/login"; throw new Error("logged out"); }
  if (!response.ok) {
    let detail = response.statusText;
    try { detail = (await response.json()).detail || detail; } catch (_) { /* not JSON */ }
    throw new Error(detail);
  }
  return response.json();
}

function showError(error) {
  const alert = document.getElementById("alert");
  alert.textContent = String(error.message || error);
  alert.hidden = false;
}

function when(iso) {
  if (!iso) return "—";
  const date = new Date(iso);
  return date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

function laneBadge(lane) {
  return el("span", { class: "lane " + (LANES[lane] ? lane : "other"), title: lane, text: LANES[lane] || lane });
}

function query() {
  const [, search = ""] = location.hash.split("?");
  return new URLSearchParams(search);
}

function setHash(path, params) {
  const search = new URLSearchParams(Object.entries(params).filter(([, v]) => v)).toString();
  location.hash = path + (search ? "?" + search : "");
}

// --- Conversations ------------------------------------------------------------

async function conversationsPage() {
  const search = query().get("q") || "";
  const box = el("input", { type: "search", placeholder: "Search people, groups, personas, text…", value: search,
    "aria-label": "Search conversations" });
  const form = el("form", { class: "toolbar", onsubmit: (event) => {
    event.preventDefault(); setHash("#/conversations", { q: box.value.trim() });
  } }, box, el("button", { class: "action", type: "submit", text: "Search" }));
  const rows = await api("/conversations?q=" + encodeURIComponent(search));
  const body = el("tbody");
  for (const row of rows) {
    const who = row.participants.length ? row.participants.join(", ") : row.id;
    body.append(el("tr", { class: "link", "data-session": row.id,
      onclick: () => { location.hash = "#/conversation/" + row.id; } },
    el("td", {}, ...row.lanes.map(laneBadge)),
    el("td", {}, el("a", { href: "#/conversation/" + row.id, text: who }),
      el("div", { class: "muted", text: (row.kind === "group" ? "group · " : "private · ") + row.id })),
    el("td", { text: when(row.last_activity) }),
    el("td", { text: String(row.message_count) }),
    el("td", {}, el("span", { class: "pill", text: row.persona_id }))));
  }
  const table = el("table", { "data-testid": "conversations" },
    el("thead", {}, el("tr", {}, ...["Lanes", "Person or group", "Last activity", "Messages", "Persona"]
      .map((title) => el("th", { text: title })))), body);
  page.replaceChildren(el("h1", { text: "Conversations" }), form,
    rows.length ? table : el("div", { class: "card empty", text: "No conversations match." }));
}

// --- Transcript ---------------------------------------------------------------

async function transcriptPage(sessionId) {
  const [data, personas] = await Promise.all([api(`/conversations/${sessionId}/transcript`), api("/personas")]);
  const session = data.session;
  const picker = el("select", { "aria-label": "Persona", name: "persona" },
    ...personas.map((p) => el("option", { value: p.id, selected: p.id === session.persona_id, text: `${p.name} (${p.id})` })));
  const switcher = el("form", { class: "toolbar", onsubmit: async (event) => {
    event.preventDefault();
    try {
      await api(`/conversations/${sessionId}/persona`, { method: "POST", json: { persona_id: picker.value } });
      await transcriptPage(sessionId);
    } catch (error) { showError(error); }
  } }, el("span", { text: "Active persona:" }), picker, el("button", { class: "action", type: "submit", text: "Switch" }),
  el("a", { href: "#/context/" + sessionId, text: "Context" }),
  el("a", { href: "#/memory?session=" + sessionId, text: "Memory" }));
  const log = el("div", { class: "log", "data-testid": "transcript" });
  for (const entry of data.entries) log.append(renderEntry(entry));
  page.replaceChildren(el("h1", { text: `Conversation ${session.id}` }),
    el("div", { class: "muted", text: `${session.kind} · ${data.entries.length} records` }), switcher,
    renderReminders(data.reminders),
    data.entries.length ? log : el("div", { class: "card empty", text: "Nothing stored yet." }));
}

function renderReminders(reminders) {
  if (!reminders.length) return el("div", { class: "muted", "data-testid": "reminders", text: "No upcoming reminders." });
  const list = el("ul", {});
  for (const r of reminders) {
    const repeat = r.recurrence ? ` · every ${r.recurrence}` : "";
    list.append(el("li", { text: `#${r.id} ${r.due_local}${repeat} — ${r.text}` }));
  }
  return el("div", { class: "card", "data-testid": "reminders" }, el("strong", { text: "Upcoming reminders" }), list);
}

function renderEntry(entry) {
  if (entry.type === "compaction" || entry.type === "collapse") {
    const label = entry.type === "compaction"
      ? `Summary up to #${entry.last_seq} (from #${entry.first_seq})${entry.focus ? " — focus: " + entry.focus : ""}`
      : `Collapsed #${entry.first_seq}–#${entry.last_seq}`;
    return el("div", { class: "record " + entry.type, "data-record": entry.type },
      el("div", { class: "kind", text: `${label} · ${entry.tokens} tokens · ${when(entry.created_at)}` }),
      ChorusRender.render(el("div"), entry.content));
  }
  if (entry.type === "snip") {
    const state = entry.undone_at ? `undone ${when(entry.undone_at)}` : "in force";
    return el("div", { class: "record snip", "data-record": "snip" },
      el("span", { class: "kind", text: "Snip " }),
      el("span", { text: `#${entry.first_seq}–#${entry.last_seq} left out of the model's context (${state})` }));
  }
  if (entry.type === "event") {
    const who = entry.sender_name ? `${entry.sender_name}: ` : "";
    const label = EVENT_LABELS[entry.kind] ?? "";
    return el("div", { class: "event" + (entry.kind === "error" ? " error" : ""), "data-seq": entry.seq,
      "data-event": entry.kind, text: `#${entry.seq} · ${who}${label}${entry.content}` });
  }
  if (entry.kind === "tool_result") return renderToolResult(entry);
  const bubble = el("div", { class: "msg " + entry.role + (entry.status === "interrupted" ? " interrupted" : ""),
    "data-seq": entry.seq, "data-role": entry.role });
  const who = entry.role === "assistant" ? (entry.persona_id || "assistant") : (entry.sender_name || "user");
  bubble.append(el("div", { class: "who", "data-persona": entry.role === "assistant" ? entry.persona_id : null, text: who }));
  // A reply as the widget shows it; what a person wrote, as they wrote it.
  if (entry.content && entry.role === "assistant") bubble.append(ChorusRender.render(el("div", { class: "text" }), entry.content));
  else if (entry.content) bubble.append(el("div", { class: "text", text: entry.content }));
  for (const call of entry.tool_calls) {
    bubble.append(el("div", { class: "call", "data-call-id": call.id },
      el("div", { class: "call-name" }, ChorusRender.icon("tool", "Tool call"), el("span", { text: call.name })),
      jsonBlock(call.arguments, "arguments"),
      call.approval ? el("div", { class: "muted", "data-role": "approval", text: approvalLine(call.approval) }) : null));
  }
  if (entry.attachments.length) bubble.append(renderFiles(entry.attachments));
  if (entry.status === "interrupted") bubble.append(el("span", { class: "cut", text: "interrupted" }));
  bubble.append(el("div", { class: "meta", text: [`#${entry.seq}`, entry.lane, when(entry.created_at)].filter(Boolean).join(" · ") }));
  return bubble;
}

// Who asked for a call to run and who decided, beside the call.
function approvalLine(approval) {
  const asked = `asked by ${approval.asked_by || "someone"} ${when(approval.asked_at)}`;
  if (approval.state === "pending") return `${asked} · waiting for a yes`;
  const decided = approval.decided_by ? ` by ${approval.decided_by} ${when(approval.decided_at)}` : ` ${when(approval.decided_at)}`;
  return `${asked} · ${approval.state}${decided}`;
}

// A tool's result, as the model read it, under the call it answers.
function renderToolResult(entry) {
  const failed = entry.status === "failed";
  const result = el("div", { class: "msg tool" + (failed ? " failed" : ""), "data-seq": entry.seq,
    "data-role": "tool", "data-call-id": entry.tool_call_id });
  result.append(el("div", { class: "who", text: `${entry.tool_name} ${failed ? "failed" : "result"}` }));
  result.append(jsonBlock(entry.content, "result"));
  if (entry.attachments.length) result.append(renderFiles(entry.attachments));
  result.append(el("div", { class: "meta", text: [`#${entry.seq}`, when(entry.created_at)].join(" · ") }));
  return result;
}

// A tool's arguments or result: indented when it is JSON, highlighted, with a copy button.
function jsonBlock(text, role) {
  let shown = text, language = "";
  try {
    shown = JSON.stringify(JSON.parse(text), null, 2);
    language = "json";
  } catch (_) { /* not JSON: shown as it is */ }
  const block = ChorusRender.codeBlock(shown, language);
  block.querySelector("pre").classList.add(role);
  return block;
}

function renderFiles(attachments) {
  const files = el("div", { class: "files" });
  for (const file of attachments) {
    if (file.heard !== undefined) {
      // A voice note or audio file: a player, and what the model reads of it.
      files.append(el("div", { "data-voice": file.filename },
        el("audio", { controls: "", preload: "none", src: `/admin/api/attachments/${file.id}` }),
        el("div", { class: "doc-text", text: file.heard })));
      continue;
    }
    if (file.kind === "image") {
      files.append(el("a", { href: `/admin/api/attachments/${file.id}`, target: "_blank", rel: "noopener" },
        el("img", { src: `/admin/api/attachments/${file.id}`, alt: file.filename, loading: "lazy" })));
      continue;
    }
    const holder = el("div", { "data-document": file.filename });
    const show = el("button", { class: "quiet", type: "button", text: "Show text", onclick: async () => {
      try {
        const { text } = await api(`/attachments/${file.id}/text`);
        holder.append(el("div", { class: "doc-text", text: text || "(no text could be extracted)" }));
        show.remove();
      } catch (error) { showError(error); }
    } });
    holder.append(el("span", { class: "chip", text: `${file.filename} · ${Math.ceil(file.size / 1024)} KB` }), " ",
      file.has_text ? show : el("span", { class: "muted", text: "no text" }));
    files.append(holder);
  }
  return files;
}

// --- Context ----------------------------------------------------------------------

async function contextPage(sessionId) {
  const data = await api(`/conversations/${sessionId}/context`);
  const budget = data.budget_tokens || data.window_tokens;
  page.replaceChildren(
    el("h1", { text: "Context" }),
    el("div", { class: "toolbar" }, el("a", { href: "#/conversation/" + sessionId, text: "← transcript" }),
      el("span", { class: "muted", text: `${data.session.persona_id} · model ${data.model}${data.model_choice ? ` (/model ${data.model_choice})` : ""}${data.thinking ? ` · thinking ${data.thinking}` : ""}` })),
    el("div", { class: "card" },
      el("h2", { text: `What the model sees now: ${data.total_tokens.toLocaleString()} of ${budget.toLocaleString()} tokens` }),
      stackedBar(data, budget),
      el("div", { class: "muted", text: `Window: ${data.window_note}.` }),
      el("div", { class: "muted", text: `${data.messages_kept} messages in the window, ${data.messages_dropped} left out.` }),
      ...data.left_out.map((note) => el("div", { class: "muted", text: `Left out (tight window): ${note}` })),
      el("div", { class: "muted", "data-testid": "last-turn", text: reuseText(data.last_turn) }),
      el("div", { class: "muted", "data-testid": "prompt-prefix", text: prefixText(data.prompt_prefix) })),
    el("div", { class: "card" },
      el("h2", { text: "Context tokens per turn" }),
      data.turns.length ? turnChart(data, budget) : el("div", { class: "empty", text: "No replies yet." }),
      el("div", { class: "muted", text: "Rebuilt from the stored rows and records as they were at each turn " +
        "(memory and recall not included). Marks: compaction (violet), collapse (orange). Green: the prompt " +
        "tokens the server evaluated afresh (its own tokens; gaps where it did not say what it reused)." })));
}

// What the server reused of the last turn's prompt; "unknown" (never 0) when it did not say.
function reuseText(turn) {
  if (!turn) return "Last turn: reused: unknown (no usage reported).";
  if (turn.reused === null) return `Last turn: ${turn.total.toLocaleString()} prompt tokens; reused: unknown (the server did not say).`;
  const share = turn.total ? Math.round((turn.reused / turn.total) * 100) : 0;
  const written = turn.cache_write ? `, ${turn.cache_write.toLocaleString()} of them written to the prompt cache` : "";
  return `Last turn: reused ${turn.reused.toLocaleString()} of ${turn.total.toLocaleString()} prompt tokens (${share}%) ` +
    `from the server's prompt cache; evaluated ${turn.evaluated.toLocaleString()}${written}.`;
}

function prefixText(prefix) {
  if (!prefix) return "Prompt prefix: unknown (no two requests of this conversation since Chorus started).";
  const last = prefix.last_break;
  const where = last && (last.part === "message" ? `message ${last.message + 1} after the system prompt` :
    last.part === "tools" ? "the tool list" : last.part === "model" ? "the model" : "the system prompt");
  const newest = prefix.newest_broke && last ? `the newest request broke it at ${where} (${last.reason})` :
    "the newest request kept the previous one's";
  const breaks = Object.entries(prefix.breaks).sort().map(([reason, count]) => `${reason} ${count}`).join(", ");
  return `Prompt prefix: ${newest}; ${prefix.compared} compared since Chorus started, ` +
    (breaks ? `breaks: ${breaks}.` : "no breaks.");
}

function stackedBar(data, budget) {
  const width = 900, height = 56, barHeight = 28;
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img",
    "aria-label": "Context tokens by part", "data-testid": "context-bar" });
  chart.append(svg("rect", { x: 0, y: 0, width, height: barHeight, rx: 6, fill: "#eef0f8" }));
  let x = 0;
  const legend = el("div", { class: "legend" });
  for (const [part, tokens] of Object.entries(data.parts)) {
    const color = PART_COLORS[part] || "#999";
    const span = el("span", { "data-part": part, text: `${part} ${tokens.toLocaleString()}` });
    span.style.setProperty("--swatch", color);
    legend.append(span);
    if (!tokens) continue;
    const w = Math.max(1, (tokens / budget) * width);
    const rect = svg("rect", { x, y: 0, width: Math.min(w, width - x), height: barHeight, fill: color, "data-part": part });
    rect.append(svg("title", {}, `${part}: ${tokens} tokens`));
    chart.append(rect);
    x += w;
  }
  for (const [share, label] of [[data.compact_share, "compact"], [data.collapse_share, "collapse"]]) {
    const at = share * width;
    chart.append(svg("line", { x1: at, x2: at, y1: 0, y2: barHeight + 4, stroke: "#394060", "stroke-dasharray": "3 2" }));
    const text = svg("text", { x: at, y: height - 4, "text-anchor": "middle" });
    text.textContent = `${label} ${Math.round(share * 100)}%`;
    chart.append(text);
  }
  return el("div", {}, chart, legend);
}

function turnChart(data, budget) {
  const width = 900, height = 260, left = 56, right = 12, top = 12, bottom = 28;
  const turns = data.turns;
  const peak = Math.max(budget, ...turns.map((t) => Math.max(t.tokens, t.evaluated || 0)));
  const xs = (i) => left + (turns.length === 1 ? 0.5 : i / (turns.length - 1)) * (width - left - right);
  const ys = (tokens) => top + (1 - tokens / peak) * (height - top - bottom);
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img",
    "aria-label": "Context tokens per turn", "data-testid": "turn-chart" });
  for (const tick of [0, 0.25, 0.5, 0.75, 1]) {
    const y = ys(peak * tick);
    chart.append(svg("line", { x1: left, x2: width - right, y1: y, y2: y, stroke: "#e2e4ee" }));
    const label = svg("text", { x: left - 6, y: y + 4, "text-anchor": "end" });
    label.textContent = Math.round(peak * tick).toLocaleString();
    chart.append(label);
  }
  const budgetY = ys(budget);
  chart.append(svg("line", { x1: left, x2: width - right, y1: budgetY, y2: budgetY, stroke: "#8a1c12", "stroke-dasharray": "5 3" }));
  const budgetLabel = svg("text", { x: width - right, y: budgetY - 4, "text-anchor": "end" });
  budgetLabel.textContent = "budget";
  chart.append(budgetLabel);
  // A record is marked at the first turn that saw it.
  for (const mark of data.marks) {
    const index = turns.findIndex((t) => t.at >= mark.at);
    if (index < 0) continue;
    const x = xs(index);
    const line = svg("line", { x1: x, x2: x, y1: top, y2: height - bottom,
      stroke: mark.kind === "compaction" ? "#8e5bd6" : "#d08a00", "stroke-width": 2, "data-mark": mark.kind });
    line.append(svg("title", {}, `${mark.kind} of #${mark.first_seq}–#${mark.last_seq}`));
    chart.append(line);
  }
  const points = turns.map((t, i) => `${xs(i).toFixed(1)},${ys(t.tokens).toFixed(1)}`).join(" ");
  chart.append(svg("polyline", { points, fill: "none", stroke: "#3b4cca", "stroke-width": 2, "data-testid": "turn-line" }));
  // The evaluated line breaks where the server did not say what it reused.
  let evaluated = [];
  const runs = [];
  turns.forEach((t, i) => {
    if (t.evaluated === null) { if (evaluated.length) runs.push(evaluated); evaluated = []; return; }
    evaluated.push(`${xs(i).toFixed(1)},${ys(t.evaluated).toFixed(1)}`);
  });
  if (evaluated.length) runs.push(evaluated);
  for (const run of runs) {
    chart.append(svg("polyline", { points: run.join(" "), fill: "none", stroke: "#1e8e6e", "stroke-width": 2,
      "stroke-dasharray": "4 2", "data-testid": "evaluated-line" }));
  }
  turns.forEach((t, i) => {
    const dot = svg("circle", { cx: xs(i), cy: ys(t.tokens), r: 3, fill: "#3b4cca", "data-turn": t.seq });
    const served = t.evaluated === null ? "reused: unknown" : `${t.evaluated} evaluated, ${t.reused} reused by the server`;
    dot.append(svg("title", {}, `reply #${t.seq}: ${t.tokens} tokens (${t.persona_id}); ${served}`));
    chart.append(dot);
  });
  const axis = svg("text", { x: left, y: height - 8 });
  axis.textContent = `${turns.length} turns — reply #${turns[0].seq} to #${turns[turns.length - 1].seq}`;
  chart.append(axis);
  return chart;
}

// --- Memory --------------------------------------------------------------------------

async function memoryPage() {
  const params = query();
  const search = params.get("q") || "";
  const session = params.get("session") || "";
  const box = el("input", { type: "search", placeholder: "Search remembered items…", value: search, "aria-label": "Search memory" });
  const form = el("form", { class: "toolbar", onsubmit: (event) => {
    event.preventDefault(); setHash("#/memory", { q: box.value.trim(), session });
  } }, box, el("button", { class: "action", type: "submit", text: "Search" }),
  session ? el("span", { class: "muted", text: `owner of conversation ${session} · ` }) : null,
  session ? el("a", { href: "#/memory", text: "everyone" }) : null);
  const items = await api(`/memory?q=${encodeURIComponent(search)}&session=${encodeURIComponent(session)}`);
  const body = el("tbody");
  for (const item of items) {
    const forget = el("button", { class: "quiet danger", type: "button", text: "Forget", onclick: async () => {
      if (!confirm(`Forget item #${item.id}? The conversation keeps an event saying so.`)) return;
      try { await api(`/memory/${item.id}/forget`, { method: "POST" }); await memoryPage(); } catch (error) { showError(error); }
    } });
    body.append(el("tr", { "data-item": item.id },
      el("td", { text: "#" + item.id }),
      el("td", {}, el("span", { class: "pill", text: item.kind })),
      el("td", { text: String(item.importance) }),
      el("td", {}, el("div", { text: item.content }), el("div", { class: "muted", text: item.owner })),
      el("td", { text: when(item.updated_at) }),
      el("td", {}, el("a", { href: "#/conversation/" + item.session_id,
        text: item.source_seq ? `#${item.source_seq}` : "conversation" })),
      el("td", {}, forget)));
  }
  const table = el("table", { "data-testid": "memory" }, el("thead", {}, el("tr", {},
    ...["", "Kind", "Importance", "Item", "Date", "Source", ""].map((t) => el("th", { text: t })))), body);
  page.replaceChildren(el("h1", { text: "Memory" }), form,
    items.length ? table : el("div", { class: "card empty", text: "Nothing remembered matches." }));
}

// --- Personas -------------------------------------------------------------------------

async function personasPage() {
  const [personas, conversations] = await Promise.all([api("/personas"), api("/conversations")]);
  const body = el("tbody");
  for (const p of personas) {
    body.append(el("tr", { "data-persona": p.id },
      el("td", {}, el("strong", { text: p.name }), el("div", { class: "muted", text: p.id }),
        p.default ? el("span", { class: "pill", text: "default" }) : null),
      el("td", { text: p.model }), el("td", { text: String(p.replies) }), el("td", { text: String(p.active_sessions) })));
  }
  const conversation = el("select", { "aria-label": "Conversation" },
    ...conversations.map((c) => el("option", { value: c.id,
      text: `${(c.participants[0] || c.id)} — now ${c.persona_id}` })));
  const persona = el("select", { "aria-label": "Persona" }, ...personas.map((p) => el("option", { value: p.id, text: p.name })));
  const form = el("form", { class: "toolbar card", onsubmit: async (event) => {
    event.preventDefault();
    try {
      await api(`/conversations/${conversation.value}/persona`, { method: "POST", json: { persona_id: persona.value } });
      await personasPage();
    } catch (error) { showError(error); }
  } }, el("span", { text: "Switch" }), conversation, el("span", { text: "to" }), persona,
  el("button", { class: "action", type: "submit", text: "Switch" }));
  page.replaceChildren(el("h1", { text: "Personas" }),
    el("table", { "data-testid": "personas" }, el("thead", {}, el("tr", {},
      ...["Persona", "Model", "Replies", "Active in"].map((t) => el("th", { text: t })))), body),
    el("h2", { text: "Switch a conversation's persona" }),
    conversations.length ? form : el("div", { class: "card empty", text: "No conversations yet." }));
}

// --- Tool calls: every call the model made, and the approvals among them ------------------

// How long the page keeps looking for the result of a call the operator let run.
const RESULT_WATCH_MS = 5 * 60 * 1000;
let toolCallsRefresh = null;

async function toolCallsPage(before) {
  clearTimeout(toolCallsRefresh);
  const { calls, next } = await api("/tool-calls" + (before ? `?before=${before}` : ""));
  const body = el("tbody");
  // An approved call runs after the decision is stored, so its result arrives a moment later:
  // the page refreshes itself until every recently approved call shows one.
  const running = calls.filter((item) => item.approval && item.approval.state === "approved" && !item.result
    && Date.now() - Date.parse(item.approval.decided_at) < RESULT_WATCH_MS);
  if (running.length) {
    toolCallsRefresh = setTimeout(() => {
      if (location.hash.startsWith("#/approvals")) toolCallsPage(before).catch(showError);
    }, 1000);
  }
  for (const item of calls) {
    const approval = item.approval;
    const answer = (approve) => async () => {
      try {
        await api(`/approvals/${approval.id}`, { method: "POST", json: { approve } });
        await toolCallsPage(before);
      } catch (error) { showError(error); }
    };
    const state = approval ? approval.state : "allowed";
    const pending = state === "pending";
    const good = state === "approved" || state === "allowed", bad = !pending && !good;
    body.append(el("tr", { "data-call": `${item.session_id}:${item.seq}:${item.call_id}`, ...(approval ? { "data-approval": approval.id } : {}) },
      el("td", { text: when(item.called_at) }),
      el("td", {}, el("strong", { text: item.tool }), el("div", { class: "muted", text: item.summary })),
      el("td", { "data-role": "asked-by", text: item.asked_by || "" }),
      el("td", {}, el("span", { class: "pill" + (good ? " good" : bad ? " bad" : ""), "data-role": "state", text: state })),
      el("td", { "data-role": "decided-by", text: approval && approval.decided_at ? `${approval.decided_by || "nobody"}, ${when(approval.decided_at)}` : "" }),
      el("td", { "data-role": "result", text: item.result || (running.includes(item) ? "running…" : "") }),
      el("td", {}, el("a", { href: "#/conversation/" + item.session_id, text: "conversation" })),
      el("td", {}, pending ? el("button", { class: "action", type: "button", "data-role": "approve", text: "Run", onclick: answer(true) }) : null,
        pending ? el("button", { class: "quiet danger", type: "button", "data-role": "deny", text: "Deny", onclick: answer(false) }) : null)));
  }
  const older = next
    ? el("button", { class: "quiet", type: "button", "data-role": "older", text: "Older calls", onclick: () => toolCallsPage(next).catch(showError) })
    : null;
  page.replaceChildren(el("h1", { text: "Tool calls" }),
    el("div", { class: "muted", text: "Every call the model made, newest first; those that asked (tools.approve) show who decided." }),
    calls.length
      ? el("table", { "data-testid": "tool-calls" }, el("thead", {}, el("tr", {},
        ...["Called", "Call", "Asked by", "State", "Decided by", "Result", "", ""].map((t) => el("th", { text: t })))), body)
      : el("div", { class: "card empty", text: before ? "No older tool calls." : "The model has not called a tool yet." }),
    older ?? "");
}

// --- Strangers waiting with a pairing code ----------------------------------------------

async function pairingsPage() {
  const pairings = await api("/pairings");
  const body = el("tbody");
  for (const item of pairings) {
    const approve = async () => {
      try {
        await api(`/pairings/${encodeURIComponent(item.code)}/approve`, { method: "POST" });
        await pairingsPage();
      } catch (error) { showError(error); }
    };
    body.append(el("tr", { "data-pairing": item.code },
      el("td", {}, laneBadge(item.lane), " ", item.lane),
      el("td", {}, el("strong", { text: item.name }), el("div", { class: "muted", text: item.user_id })),
      el("td", {}, el("code", { text: item.code })),
      el("td", { text: when(item.expires_at) }),
      el("td", {}, el("button", { class: "action", type: "button", "data-role": "approve", text: "Approve", onclick: approve }))));
  }
  page.replaceChildren(el("h1", { text: "Strangers" }),
    el("div", { class: "muted", text: "People who messaged the bot privately and got a pairing code (access.dm: pairing). Approved, they are members." }),
    pairings.length
      ? el("table", { "data-testid": "pairings" }, el("thead", {}, el("tr", {},
        ...["Lane", "Who", "Code", "Expires", ""].map((t) => el("th", { text: t })))), body)
      : el("div", { class: "card empty", text: "No stranger is waiting for a pairing code's approval." }));
}

// --- Health -----------------------------------------------------------------------------

async function healthPage() {
  const data = await api("/health");
  const lanes = el("tbody");
  for (const lane of data.lanes) {
    const good = lane.state === "running", bad = lane.state === "failed" || lane.state === "down";
    lanes.append(el("tr", { "data-lane": lane.name },
      el("td", {}, laneBadge(lane.name), " ", lane.name),
      el("td", {}, el("span", { class: "pill" + (good ? " good" : bad ? " bad" : ""), text: lane.state })),
      el("td", { text: lane.reason || "" })));
  }
  const errors = el("tbody");
  for (const error of data.model.recent_errors) {
    errors.append(el("tr", {}, el("td", { text: when(error.at) }), el("td", { text: error.kind }),
      el("td", { text: error.purpose || "turn" }), el("td", { text: error.message })));
  }
  const servers = el("tbody");
  for (const server of data.mcp_servers) {
    const good = server.state === "ready", bad = server.state === "down";
    servers.append(el("tr", { "data-mcp-server": server.name },
      el("td", { text: server.name }), el("td", { text: server.transport }),
      el("td", {}, el("span", { class: "pill" + (good ? " good" : bad ? " bad" : ""), text: server.state })),
      el("td", { text: server.tools.join(", ") }), el("td", { text: String(server.restarts) }),
      el("td", { text: server.last_error || "" })));
  }
  page.replaceChildren(el("h1", { text: "Health" }),
    el("div", { class: "grid" },
      el("div", { class: "card" }, el("div", { class: "muted", text: "Model" }),
        el("div", { class: "stat", text: data.model.name }), el("div", { class: "muted", text: "via " + data.model.provider })),
      el("div", { class: "card" }, el("div", { class: "muted", text: "Background jobs queued" }),
        el("div", { class: "stat", "data-testid": "queue-depth", text: String(data.jobs.queued) })),
      el("div", { class: "card" }, el("div", { class: "muted", text: "Recent model errors" }),
        el("div", { class: "stat", text: String(data.model.recent_errors.length) }))),
    el("h2", { text: "Lanes" }),
    el("table", { "data-testid": "lanes" }, el("thead", {}, el("tr", {},
      ...["Lane", "State", "Reason"].map((t) => el("th", { text: t })))), lanes),
    el("h2", { text: "MCP servers" }),
    data.mcp_servers.length
      ? el("table", { "data-testid": "mcp-servers" }, el("thead", {}, el("tr", {},
        ...["Server", "Transport", "State", "Tools", "Restarts", "Last error"].map((t) => el("th", { text: t })))), servers)
      : el("div", { class: "card empty", text: "No MCP servers configured (tools.mcp_servers)." }),
    el("h2", { text: "Recent model errors" }),
    data.model.recent_errors.length
      ? el("table", {}, el("thead", {}, el("tr", {}, ...["When", "Kind", "Call", "Message"].map((t) => el("th", { text: t })))), errors)
      : el("div", { class: "card empty", text: "No model errors since this process started." }));
}

// --- Router -----------------------------------------------------------------------------

const ROUTES = [
  [/^#\/conversation\/([\w-]+)/, (m) => transcriptPage(m[1]), "conversations"],
  [/^#\/context\/([\w-]+)/, (m) => contextPage(m[1]), "conversations"],
  [/^#\/memory/, () => memoryPage(), "memory"],
  [/^#\/personas/, () => personasPage(), "personas"],
  [/^#\/approvals/, () => toolCallsPage(), "approvals"],
  [/^#\/pairings/, () => pairingsPage(), "pairings"],
  [/^#\/health/, () => healthPage(), "health"],
  [/^/, () => conversationsPage(), "conversations"],
];

async function route() {
  document.getElementById("alert").hidden = true;
  const hash = location.hash || "#/conversations";
  for (const [pattern, render, nav] of ROUTES) {
    const match = hash.match(pattern);
    if (!match) continue;
    for (const link of document.querySelectorAll("[data-nav]")) link.classList.toggle("active", link.dataset.nav === nav);
    page.setAttribute("data-loading", "");
    try { await render(match); } catch (error) { showError(error); }
    page.removeAttribute("data-loading");
    page.setAttribute("data-page", nav);
    return;
  }
}

// On a phone a table's rows are cards (admin.css): each cell is named by its column's heading.
// Every page's tables, however they were drawn (a page also redraws itself, e.g. Tool calls).
function nameCells() {
  for (const table of page.querySelectorAll(":scope > table")) {
    const names = [...table.querySelectorAll("thead th")].map((heading) => heading.textContent);
    for (const row of table.querySelectorAll("tbody tr")) {
      [...row.children].forEach((cell, index) => { if (names[index]) cell.dataset.label = names[index]; });
    }
  }
}
new MutationObserver(nameCells).observe(page, { childList: true, subtree: true });

// On a narrow screen the pages' links fold into a menu under one button.
const menu = document.getElementById("menu");
menu.append(ChorusRender.icon("menu"));
function showMenu(open) {
  document.querySelector(".top").classList.toggle("open", open);
  menu.setAttribute("aria-expanded", String(open));
}
menu.addEventListener("click", () => showMenu(menu.getAttribute("aria-expanded") !== "true"));
window.addEventListener("hashchange", () => showMenu(false));

document.getElementById("logout").addEventListener("click", async () => {
  await fetch("/admin/logout", { method: "POST", headers: { "X-CSRF-Token": CSRF }, credentials: "same-origin" });
  location.href = "/admin/login";
});
window.addEventListener("hashchange", route);
route();
