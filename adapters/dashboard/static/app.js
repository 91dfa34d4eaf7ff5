// The dashboard's script: keeps the server-rendered board current (GET /board on every state
// event), shows what live runs do (output events: their activity, from the start), and sends
// the actions with the token.
"use strict";

const TOKEN_KEY = "cpe-dashboard-token";
const board = document.getElementById("board");
const live = document.getElementById("live");
const liveNone = document.getElementById("live-none");
const notice = document.getElementById("notice");
const tokenInput = document.getElementById("token");

// A token in the address (#token=...) is kept for this tab and taken out of the address.
(function takeTokenFromAddress() {
  const match = location.hash.match(/token=([^&]+)/);
  if (match) {
    sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  tokenInput.value = sessionStorage.getItem(TOKEN_KEY) || "";
})();

tokenInput.addEventListener("change", () => {
  sessionStorage.setItem(TOKEN_KEY, tokenInput.value.trim());
});
document.getElementById("token-form").addEventListener("submit", (e) => e.preventDefault());

function say(text, isError) {
  notice.textContent = text;
  notice.className = isError ? "error" : "ok";
}

// One fetch at a time; a change meanwhile fetches once more after it, so the board never
// stays on a state older than the last event.
let boardPending = false;
let boardAgain = false;
async function refreshBoard() {
  if (boardPending) {
    boardAgain = true;
    return;
  }
  boardPending = true;
  try {
    do {
      boardAgain = false;
      const response = await fetch("/board", { cache: "no-store" });
      if (response.ok) redraw(await response.text());
    } while (boardAgain);
  } finally {
    boardPending = false;
  }
}

// What a person was doing on the board survives its redraw: the review comments they opened,
// the reason they are typing for a pause (and where the cursor was).
function redraw(html) {
  const open = [...board.querySelectorAll("details[open]")].map((d) => d.id);
  const typing = document.activeElement;
  const field = typing && board.contains(typing) && typing.id ? typing : null;
  const kept = [...board.querySelectorAll("input[id]")].map((i) => [i.id, i.value]);
  const caret = field ? [field.selectionStart, field.selectionEnd] : null;
  board.innerHTML = html;
  for (const id of open) {
    const details = document.getElementById(id);
    if (details) details.open = true;
  }
  for (const [id, value] of kept) {
    const input = document.getElementById(id);
    if (input) input.value = value;
  }
  if (field) {
    const again = document.getElementById(field.id);
    if (again) {
      again.focus();
      if (caret && again.setSelectionRange) again.setSelectionRange(caret[0], caret[1]);
    }
  }
}

function panel(session, run) {
  let box = document.getElementById("live-" + session);
  if (!box) {
    box = document.createElement("article");
    box.id = "live-" + session;
    box.className = "run-output";
    box.dataset.session = session;
    const head = document.createElement("h3");
    const signal = document.createElement("p");
    signal.className = "signal";
    const pre = document.createElement("pre");
    box.append(head, signal, pre);
    live.prepend(box);
    while (live.querySelectorAll(".run-output").length > 6) {
      live.querySelector(".run-output:last-of-type").remove();
    }
  }
  if (run) {
    const subject = run.work_item_id ? "#" + run.work_item_id : run.subject;
    const node = run.node ? ` · on ${run.node.label}` : "";
    box.querySelector("h3").textContent = `${run.role} · ${subject} · ${run.session_id}${node}`;
    // What its CLI says of the model API: retrying …, rate-limited … (empty once it answers).
    box.querySelector(".signal").textContent = run.signal ? run.signal.text : "";
  }
  return box;
}

function onState(view) {
  for (const run of view.runs.active) panel(run.session_id, run);
  // A run still starting is active too: "no run is active" only when none is.
  liveNone.hidden = view.runs.active.length > 0;
  for (const box of live.querySelectorAll(".run-output")) {
    const active = view.runs.active.some((r) => r.session_id === box.dataset.session);
    box.classList.toggle("ended", !active);
    if (!active) box.querySelector(".signal").textContent = "";
  }
  refreshBoard();
}

function onOutput(data) {
  const box = panel(data.session, null);
  if (data.end) {
    box.classList.add("ended");
    return;
  }
  liveNone.hidden = true;
  const pre = box.querySelector("pre");
  pre.textContent += data.text.endsWith("\n") ? data.text : data.text + "\n";
  pre.scrollTop = pre.scrollHeight;
}

const events = new EventSource("/api/events");
events.addEventListener("state", (e) => onState(JSON.parse(e.data)));
events.addEventListener("output", (e) => onOutput(JSON.parse(e.data)));
events.onerror = () => say("connection lost; reconnecting…", true);
events.onopen = () => {
  if (notice.textContent.startsWith("connection lost")) say("", false);
};

const ROUTES = {
  retry: (item) => `/api/work/${encodeURIComponent(item)}/retry`,
  cancel: (item) => `/api/work/${encodeURIComponent(item)}/cancel`,
  pause: () => "/api/pause",
  resume: () => "/api/resume",
};

// The pause's form is sent by its button (Enter in its field clicks it), never as a form.
board.addEventListener("submit", (e) => e.preventDefault());

board.addEventListener("click", async (e) => {
  const button = e.target.closest("button[data-action]");
  if (!button) return;
  e.preventDefault();
  const action = button.dataset.action;
  const item = button.dataset.item;
  // A cancel blocks the item until someone retries it: asked first.
  if (button.dataset.confirm && !window.confirm(button.dataset.confirm)) {
    say(`${action}${item ? " #" + item : ""}: not sent`, false);
    return;
  }
  const body = {};
  if (action === "pause") {
    const reason = document.getElementById("pause-reason");
    if (reason && reason.value.trim()) body.reason = reason.value.trim();
  }
  const token = sessionStorage.getItem(TOKEN_KEY) || tokenInput.value.trim();
  const headers = { "Content-Type": "application/json" };
  if (token) headers.Authorization = "Bearer " + token;
  button.disabled = true;
  say(`${action}${item ? " #" + item : ""}…`, false);
  try {
    const response = await fetch(ROUTES[action](item), {
      method: "POST",
      headers,
      body: JSON.stringify(body),
    });
    const answer = await response.json();
    if (response.ok && action === "pause") {
      const reason = document.getElementById("pause-reason");
      if (reason) reason.value = "";
    }
    if (response.ok) say(answer.message, false);
    else say(`${action} refused (${response.status}): ${answer.error}`, true);
  } catch (error) {
    say(`${action} failed: ${error}`, true);
  } finally {
    button.disabled = false;
    refreshBoard();
  }
});
