// A run's page while the run is live: its body (header, result, activity) is fetched again from
// the server (data-part) whenever the engine's state changes or the run's activity grows, until
// the run has ended. The activity box stays where the reader scrolled it (at its end: follows).
"use strict";

const detail = document.getElementById("detail");
const session = detail.dataset.session;
const part = detail.dataset.part;

function live() {
  const state = document.getElementById("run-state");
  return state !== null && state.dataset.live === "true";
}

let pending = false;
let again = false;
async function refresh() {
  if (pending) {
    again = true;
    return;
  }
  pending = true;
  try {
    do {
      again = false;
      const response = await fetch(part, { cache: "no-store" });
      if (response.ok) redraw(await response.text());
    } while (again);
  } finally {
    pending = false;
  }
  if (!live()) events.close();
}

function redraw(html) {
  const before = document.getElementById("activity");
  const atEnd = !before || before.scrollTop + before.clientHeight >= before.scrollHeight - 4;
  const top = before ? before.scrollTop : 0;
  detail.innerHTML = html;
  const after = document.getElementById("activity");
  if (after) after.scrollTop = atEnd ? after.scrollHeight : top;
}

const events = new EventSource("/api/events");
events.addEventListener("state", () => refresh());
events.addEventListener("output", (e) => {
  if (JSON.parse(e.data).session === session) refresh();
});
if (!live()) events.close();
