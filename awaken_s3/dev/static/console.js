// The awaken-s3 dev console: plain DOM, no build step, no library.
// It talks to the real HTTP API (the routes template.yaml deploys) for threads, runs and the
// live partial view, to the WebSocket API (ws://…/ws) for the run's text as the worker pushes
// it, and to the dev server's /dev/ endpoints for what only a developer sees: the lease, the
// checkpoint's fencing fields, tool-call claims, the worker processes. While the socket is
// open the partial view is polled slowly, for the run's state only; when the socket cannot
// be (re)opened, polling brings the text as well.
// Every text that comes from a run is set with textContent, never parsed as HTML.
"use strict";

const TERMINAL = new Set(["completed", "failed", "cancelled"]);
const token = new URLSearchParams(location.hash.slice(1)).get("token");
const $ = (id) => document.getElementById(id);

const agents = new Map();  // name -> the API's view of the agent (GET /agents)

const state = {
  thread: null,       // the selected thread's id
  run: null,          // the open run's id
  generation: 0,      // bumped when another run is opened: stale polls stop
  turn: null,         // the turn the partial text belongs to
  text: "",           // the turn's text so far, as the API returned it
  etag: null,         // the partial view's version, sent back as If-None-Match
  status: null,
  committedTurns: 0,  // model turns the open run committed (the view's "turn")
  messageCount: 0,    // the thread's length as the open run last advanced it
  writers: [],
  source: "polling",  // where the text comes from: "socket" while one is open
  frames: 0,          // frames the socket brought for the open run
  socket: null,
  wake: null,         // resolves the partial poll's sleep (the socket saw the run end)
};

async function call(method, path, body, extraHeaders) {
  const headers = Object.assign({}, extraHeaders || {});
  if (token) headers["Authorization"] = "Bearer " + token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, cache: "no-store",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = response.status === 304 ? "" : await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = { message: text }; }
  return { status: response.status, headers: response.headers, data };
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function sleep(ms) { return new Promise((resolve) => setTimeout(resolve, ms)); }

// -- the header

async function loadInfo() {
  const { status, data } = await call("GET", "/dev/info");
  if (status !== 200) {
    $("info").textContent = status === 401
      ? "this dev server needs a token: open the URL it printed (…/#token=…)"
      : "the dev server did not answer";
    return;
  }
  const model = data.model === "scripted" ? "scripted model" : `${data.model} (${data.model_id})`;
  $("info").textContent =
    `app ${data.app} · identity ${data.identity} · ${model} · storage ${data.storage} · ` +
    `lease ${data.lease_seconds} s · up to ${data.workers} workers · logs ${data.log_dir}`;
}

// -- the app's agents (the real API's GET /agents)

async function loadAgents() {
  const { status, data } = await call("GET", "/agents");
  if (status !== 200) return;
  const select = $("agent");
  select.replaceChildren();
  agents.clear();
  for (const agent of data.agents) {
    agents.set(agent.name, agent);
    select.append(el("option", { value: agent.name }, agent.name));
  }
  renderAgent();
}

// The selected agent's description and tools; where the agent lets a caller choose its
// tools, each is a checkbox (all on: the agent's own choice), else they are only listed.
function renderAgent() {
  const agent = agents.get($("agent").value);
  const box = $("agent-tools");
  box.replaceChildren();
  $("agent-about").textContent = agent ? `${agent.description} · model ${agent.model}` : "";
  if (!agent) return;
  if (!agent.tools.length) { box.append(el("p", { class: "muted" }, "no tools")); return; }
  const choose = agent.overridable.includes("tools");
  for (const t of agent.tools) {
    const input = el("input", { type: "checkbox", "data-tool": t.name, "data-testid": `tool-${t.name}` });
    input.checked = true;
    input.disabled = !choose;
    box.append(el("label", { class: "inline", title: t.description }, input, " offer ",
      el("code", {}, t.name)));
  }
}

function chosenTools(agent) {
  if (!agent || !agent.overridable.includes("tools")) return undefined;
  return Array.from($("agent-tools").querySelectorAll("input[data-tool]"))
    .filter((input) => input.checked).map((input) => input.dataset.tool);
}

// -- threads and runs

async function loadThreads() {
  const { status, data } = await call("GET", "/dev/threads");
  if (status !== 200) return;
  const list = $("threads");
  list.replaceChildren();
  if (!data.threads.length) list.append(el("li", { class: "muted" }, "none yet"));
  for (const thread of data.threads) {
    const runs = el("ul", { class: "runs" });
    for (const run of thread.runs) {
      runs.append(el("li", {
        class: run.run_id === state.run ? "current" : "",
        "data-run": run.run_id,
        onclick: (e) => { e.stopPropagation(); openRun(run.run_id, thread.thread_id); },
      }, el("code", {}, run.run_id), " ", el("span", { class: "badge " + run.status }, run.status)));
    }
    list.append(el("li", { class: thread.thread_id === state.thread ? "selected" : "" },
      el("div", { class: "thread", onclick: () => selectThread(thread.thread_id) },
        "thread ", el("code", {}, thread.thread_id), el("span", { class: "muted" },
          ` · ${thread.message_count} messages`)),
      runs));
  }
}

function selectThread(threadId) {
  state.thread = state.thread === threadId ? null : threadId;
  $("where").textContent = state.thread ? `in thread ${state.thread}` : "in a new thread";
  loadThreads();
}

async function startRun(event) {
  event.preventDefault();
  $("form-error").textContent = "";
  const message = $("message").value.trim();
  if (!message) { $("form-error").textContent = "write a message first"; return; }
  let threadId = state.thread;
  if (!threadId) {
    const created = await call("POST", "/threads", {});
    if (created.status !== 201) { $("form-error").textContent = created.data.message; return; }
    threadId = created.data.thread_id;
  }
  const agent = agents.get($("agent").value);
  const body = { message };
  if (agent) body.agent = agent.name;
  const tools = chosenTools(agent);
  if (tools !== undefined) body.tools = tools;
  const started = await call("POST", `/threads/${threadId}/runs`, body);
  if (started.status !== 202) {
    $("form-error").textContent = started.data.message || `HTTP ${started.status}`;
    return;
  }
  state.thread = threadId;
  $("where").textContent = `in thread ${threadId}`;
  await loadThreads();
  openRun(started.data.run_id, threadId);
}

// -- one run

function openRun(runId, threadId) {
  state.generation += 1;
  if (state.socket) state.socket.close();
  Object.assign(state, { run: runId, thread: threadId, turn: null, text: "", etag: null,
                         status: null, committedTurns: 0, messageCount: 0, writers: [],
                         source: "polling", frames: 0, socket: null });
  $("run").hidden = false;
  $("run-id").textContent = runId;
  resetRunView();
  loadThreads();
  followSocket(state.generation, 0);
  followPartial(state.generation);
  followInternals(state.generation);
}

// Every fact on the page is the open run's own: nothing of the run shown before survives.
function resetRunView() {
  const badge = $("run-status");
  badge.textContent = "";
  badge.className = "badge";
  $("run-turn").textContent = "";
  showError(null);
  $("turn-title").textContent = "Partial turn";
  $("partial").textContent = "";
  $("live-source").textContent = "–";
  $("live-frames").textContent = "0";
  $("live-frames").dataset.chars = "0";
  for (const id of ["ck-version", "ck-epoch", "ck-writer", "ck-plan", "lease"]) $(id).textContent = "–";
  $("worker").textContent = "";
  $("kill").disabled = true;
  $("kill-result").textContent = "";
  renderWriters([]);
  lastPartialCalls = [];
  lastClaims = [];
  renderToolCalls([], []);
  renderInvocations([]);
  $("messages").replaceChildren();
}

function showError(error) {
  $("run-error").hidden = !error;
  $("run-error-code").textContent = error ? error.code : "";
  $("run-error-message").textContent = error ? error.message : "";
}

// The public API's live view: one conditional GET per poll, only the new text.
async function followPartial(generation) {
  while (generation === state.generation) {
    const query = state.turn === null ? "" : `?turn=${state.turn}&after=${textLength(state.text)}`;
    const headers = state.etag ? { "If-None-Match": state.etag } : {};
    const { status, headers: answer, data } =
      await call("GET", `/runs/${state.run}/partial${query}`, undefined, headers);
    if (generation !== state.generation) return;
    if (status === 200) {
      state.etag = answer.get("ETag");
      applyPartial(data);
      if (TERMINAL.has(data.status)) { await showThread(generation); return; }
    }
    const pause = status === 200 || status === 304 ? (state.source === "socket" ? 1000 : 300) : 1500;
    await new Promise((resolve) => { state.wake = resolve; setTimeout(resolve, pause); });
  }
}

// -- the WebSocket API: the worker pushes the run's durable text, each frame with its
// offset; the text is assembled by offset (characters already held are skipped), and a
// socket that closes is opened again naming the turn and offset held.
function followSocket(generation, failures) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const query = token ? `?token=${encodeURIComponent(token)}` : "";
  let socket;
  try { socket = new WebSocket(`${scheme}//${location.host}/ws${query}`); }
  catch (e) { return; }
  state.socket = socket;
  let opened = false;
  socket.onopen = () => {
    opened = true;
    const message = { action: "follow", run_id: state.run };
    if (state.turn !== null) { message.turn = state.turn; message.after = textLength(state.text); }
    socket.send(JSON.stringify(message));
  };
  socket.onmessage = (event) => {
    if (generation !== state.generation) return;
    applyFrame(JSON.parse(event.data));
  };
  socket.onclose = () => {
    if (generation !== state.generation || TERMINAL.has(state.status)) return;
    state.source = "polling";
    $("live-source").textContent = "polling";
    const next = opened ? 0 : failures + 1;
    if (next < 3) setTimeout(() => followSocket(generation, next), 500);  // else: polling
  };
}

function applyFrame(frame) {
  state.frames += 1;
  $("live-frames").textContent = String(state.frames);
  if (frame.type === "following") {
    state.source = "socket";
    $("live-source").textContent = "socket";
  } else if (frame.type === "text" && state.source === "socket") {
    if (frame.turn !== state.turn) {
      if (state.turn !== null && frame.turn < state.turn) return;  // a turn behind: held
      state.turn = frame.turn; state.text = "";
    }
    const have = textLength(state.text);
    if (frame.offset > have) return;  // never expected: the frames leave no gap
    const fresh = Array.from(frame.text).slice(have - frame.offset);
    state.text += fresh.join("");
    $("live-frames").dataset.chars = String(Number($("live-frames").dataset.chars || 0) + fresh.length);
    $("turn-title").textContent = `Partial turn ${frame.turn} (streaming)`;
    renderText();
  } else if (frame.type === "resumed") {
    $("ck-plan").textContent = frame.plan;
  } else if (frame.type === "run_ended") {
    state.status = frame.status;
    if (state.socket) state.socket.close();
    if (state.wake) state.wake();  // the partial view shows the end and the committed turn
  }
}

function textLength(text) { return Array.from(text).length; }  // offsets count code points

function applyPartial(view) {
  state.status = view.status;
  const badge = $("run-status");
  badge.textContent = view.status;
  badge.className = "badge " + view.status;
  $("run-turn").textContent = `turn ${view.turn} · ${view.message_count} messages committed`;
  state.committedTurns = view.turn;
  state.messageCount = view.message_count;
  showError(view.error);
  const partial = view.partial;
  if (partial && state.source === "socket") {
    // The text comes through the socket; the poll brings the checkpoint's facts only.
    $("ck-version").textContent = partial.version;
    $("ck-plan").textContent = partial.resumed_with || "not resumed";
    renderToolCalls(partial.tool_calls, null);
  } else if (partial) {
    if (partial.turn !== state.turn) { state.turn = partial.turn; state.text = ""; }
    const have = textLength(state.text);
    // An offset below what we sent means the text was replaced (R4 after whitespace only).
    state.text = partial.offset === have
      ? state.text + partial.text
      : Array.from(state.text).slice(0, partial.offset).join("") + partial.text;
    $("turn-title").textContent = `Partial turn ${partial.turn} (streaming)`;
    $("ck-version").textContent = partial.version;
    $("ck-plan").textContent = partial.resumed_with || "not resumed";
    renderToolCalls(partial.tool_calls, null);
  } else if (TERMINAL.has(view.status)) {
    $("turn-title").textContent = "Last turn (committed)";
  }
  renderText();
}

// Marks where each resumed writer took over: the text before the seam is the saved prefix.
function renderText() {
  const node = $("partial");
  node.replaceChildren();
  const chars = Array.from(state.text);
  const seams = [];
  for (let i = 1; i < state.writers.length; i++) {
    const writer = state.writers[i];
    if (writer.turn === state.turn && writer.resumed_with) {
      seams.push({ at: state.writers[i - 1].text_length_last, plan: writer.resumed_with });
    }
  }
  let from = 0;
  for (const seam of seams) {
    if (seam.at < from || seam.at > chars.length) continue;
    node.append(chars.slice(from, seam.at).join(""));
    node.append(el("span", { class: "seam", title: "a new worker resumed here" }, `resumed: ${seam.plan}`));
    from = seam.at;
  }
  node.append(chars.slice(from).join(""));
  if (!TERMINAL.has(state.status)) node.append(el("span", { class: "cursor" }));
}

// The dev server's view: lease, checkpoint fencing fields, claims, workers, history.
// It goes on, slower, after the run ended: the last invocation is settled (its records
// deleted, its outcome known) a moment after the run's commit.
async function followInternals(generation) {
  while (generation === state.generation) {
    const { status, data } = await call("GET", `/dev/runs/${state.run}`);
    if (generation !== state.generation) return;
    if (status === 200) renderInternals(data);
    await sleep(status === 200 && TERMINAL.has(data.status) ? 1500 : 400);
  }
}

function renderInternals(run) {
  const checkpoint = run.checkpoint;
  if (checkpoint) {
    $("ck-epoch").textContent = checkpoint.epoch;
    $("ck-writer").textContent = checkpoint.writer;
  } else if (TERMINAL.has(run.status)) {
    $("ck-version").textContent = run.status === "completed" ? "deleted after the commit" : "none left";
  }
  $("lease").textContent = run.lease.owner
    ? `epoch ${run.lease.epoch}, held by ${run.lease.owner}, ${run.lease.expires_in} s left`
    : `epoch ${run.lease.epoch}, free`;
  const worker = run.workers[0];
  $("worker").textContent = worker ? `driven by worker pid ${worker.pid}` : "no worker is driving it now";
  $("kill").disabled = !worker;
  state.writers = run.writers;
  renderWriters(run.writers);
  renderToolCalls(checkpoint ? checkpoint.tool_calls.map((c) => ({
    index: c.index, id: c.id, name: c.name, arguments: c.arguments, complete: c.closed,
  })) : [], run.tool_calls);
  renderInvocations(run.invocations);
  renderText();
}

function renderWriters(writers) {
  const list = $("writers");
  list.replaceChildren();
  if (!writers.length) list.append(el("li", { class: "muted" }, "no checkpoint written yet"));
  writers.forEach((w, i) => {
    const before = i > 0 && writers[i - 1].turn === w.turn ? writers[i - 1] : null;
    const saved = before ? ` from the ${before.text_length_last} characters saved` : "";
    const how = w.resumed_with
      ? `resumed with ${w.resumed_with}${saved}`
      : before ? "took the turn over" : "started the turn";
    list.append(el("li", { "data-plan": w.resumed_with || "" },
      `turn ${w.turn}, epoch ${w.epoch}: `, el("strong", {}, how), " · writer ",
      el("code", {}, w.writer)));
  });
}

let lastPartialCalls = [];
let lastClaims = [];
function renderToolCalls(partialCalls, claims) {
  if (partialCalls !== null) lastPartialCalls = partialCalls;
  if (claims !== null) lastClaims = claims;
  const body = $("tools");
  body.replaceChildren();
  const ids = new Set([...lastPartialCalls.map((c) => c.id), ...lastClaims.map((c) => c.id)]);
  if (!ids.size) body.append(el("tr", {}, el("td", { colspan: "5", class: "muted" }, "none")));
  for (const id of ids) {
    const call = lastPartialCalls.find((c) => c.id === id);
    const claim = lastClaims.find((c) => c.id === id);
    body.append(el("tr", {},
      el("td", {}, el("code", {}, id)),
      el("td", {}, (call || claim).name),
      el("td", {}, el("code", {}, call ? call.arguments : "")),
      el("td", {}, call ? (call.complete ? "complete" : "streaming") : "–"),
      el("td", {}, claim
        ? `${claim.status} by epoch ${claim.epoch}, ${claim.attempts} attempt(s)${claim.is_error ? ", error" : ""}`
        : "not claimed")));
  }
}

function renderInvocations(invocations) {
  const body = $("invocations");
  body.replaceChildren();
  if (!invocations.length) body.append(el("tr", {}, el("td", { colspan: "3", class: "muted" }, "none finished yet")));
  for (const inv of invocations) {
    body.append(el("tr", {}, el("td", {}, inv.pid), el("td", {}, inv.outcome), el("td", {}, inv.duration)));
  }
}

async function showThread(generation) {
  const { status, data } = await call("GET", `/threads/${state.thread}`);
  if (status !== 200 || generation !== state.generation) return;
  const list = $("messages");
  list.replaceChildren();
  for (const message of data.messages) {
    const parts = message.content.map((block) => {
      if (block.type === "text") return el("span", { class: "block-text" }, block.text);
      if (block.type === "tool_use") return el("code", {}, ` [calls ${block.name} ${JSON.stringify(block.input)}] `);
      if (block.type === "tool_result") return el("code", {}, ` [result: ${block.content}] `);
      return el("code", {}, ` [${block.type}] `);
    });
    list.append(el("li", { "data-role": message.role }, el("span", { class: "role" }, message.role), ...parts));
  }
  // The committed turn extends the last partial shown: finish the text with it. Only a turn
  // this run committed counts: one that committed none has no turn of its own (the thread's
  // last assistant message is an earlier run's), and past the run's message count are a
  // later run's messages.
  const mine = state.committedTurns > 0 ? data.messages.slice(0, state.messageCount) : [];
  const last = mine.filter((m) => m.role === "assistant").pop();
  const committed = last ? last.content.filter((b) => b.type === "text").map((b) => b.text).join("") : "";
  if (!last) {
    $("turn-title").textContent = "No turn committed by this run";
  } else if (committed && committed.startsWith(state.text)) {
    state.text = committed;
    $("turn-title").textContent = "Last turn (committed: it extends every partial shown)";
  } else if (committed && state.text) {
    $("turn-title").textContent = "Last partial turn (the committed turn is below)";
  }
  renderText();
  loadThreads();
}

async function kill() {
  $("kill").disabled = true;
  const { status, data } = await call("POST", `/dev/runs/${state.run}/kill`);
  $("kill-result").textContent = status === 200
    ? `killed pid ${data.killed.join(", ")}: the run resumes when its lease runs out`
    : data.message;
}

$("new-run").addEventListener("submit", startRun);
$("kill").addEventListener("click", kill);
$("agent").addEventListener("change", renderAgent);
loadInfo();
loadAgents();
loadThreads();
setInterval(loadThreads, 3000);
