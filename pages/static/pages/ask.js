/* Asking: post a question to the live-turn endpoint and render its SSE
 * stream (docs/live.md): text grows, chips appear on `citation` events, and a
 * dropped stream resumes with Last-Event-ID from the turn's events URL.
 * fetch() and a stream reader, because EventSource cannot POST. */
(function () {
  "use strict";
  var form = document.getElementById("ask-form");
  if (!form) return;
  var input = document.getElementById("ask-input");
  var status = document.getElementById("ask-status");
  var turns = document.getElementById("turns");
  var names = JSON.parse(document.getElementById("account-names").textContent);
  var csrf = document.querySelector("input[name=csrfmiddlewaretoken]").value;
  var MAX_RECONNECTS = 5;

  function say(text, isError) {
    status.textContent = text;
    status.classList.toggle("ask__status--error", !!isError);
  }

  /* Yield parsed SSE events ({id, event, data}) from a fetch Response, to `onEvent`. */
  async function readEvents(response, onEvent) {
    var reader = response.body.getReader(), decoder = new TextDecoder(), buffer = "";
    var ev = { id: null, event: "message", data: [] };
    for (;;) {
      var chunk = await reader.read();
      if (chunk.done) return;
      buffer += decoder.decode(chunk.value, { stream: true });
      var lines = buffer.split(/\r\n|\r|\n/);
      buffer = lines.pop();
      for (var i = 0; i < lines.length; i++) {
        var line = lines[i];
        if (line === "") {
          if (ev.data.length) onEvent({ id: ev.id, event: ev.event, data: ev.data.join("\n") });
          ev = { id: null, event: "message", data: [] };
          continue;
        }
        if (line.charAt(0) === ":") continue;
        var colon = line.indexOf(":");
        var field = colon < 0 ? line : line.slice(0, colon);
        var value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "data") ev.data.push(value);
        else if (field === "event") ev.event = value;
        else if (field === "id") ev.id = value;
      }
    }
  }

  function newTurn(question) {
    var empty = document.getElementById("no-turns");
    if (empty) empty.remove();
    var article = document.createElement("article");
    article.className = "turn turn--live";
    article.setAttribute("aria-busy", "true");
    article.innerHTML = '<div class="turn__question"><h2 class="visually-hidden">Question</h2><p></p></div>' +
      '<div class="turn__answer"><div class="answer"></div><p class="stray" hidden></p></div>';
    article.querySelector(".turn__question p").textContent = question;
    turns.append(article);
    return article;
  }

  async function errorText(response) {
    try {
      var body = await response.json();
      if (body && body.error && body.error.message) return body.error.message;
      if (body && body.detail) return String(body.detail);
    } catch (e) { /* not JSON */ }
    return "The server answered " + response.status + ".";
  }

  async function ask(question) {
    var article = newTurn(question);
    var answerEl = article.querySelector(".answer"), strayEl = article.querySelector(".stray");
    var state = { answer: "", inline: [], turnId: null, lastId: null, finished: false, pending: false };
    function paint() {
      state.pending = false;
      window.SilviaChips.renderAnswer(answerEl, strayEl, state.answer, state.inline, names);
    }
    function schedule() { if (!state.pending) { state.pending = true; requestAnimationFrame(paint); } }
    function onEvent(ev) {
      if (ev.id !== null) state.lastId = ev.id;
      var data;
      try { data = JSON.parse(ev.data); } catch (e) { return; }
      if (ev.event === "turn") { state.turnId = data.turn_id; article.dataset.turnId = data.turn_id; }
      else if (ev.event === "text") { state.answer += data.text || ""; schedule(); }
      else if (ev.event === "citation") { state.inline.push(data.citation); schedule(); }
      else if (ev.event === "done") {
        state.finished = true;
        if (data.log_id) { article.id = "turn-" + data.log_id; article.dataset.logId = data.log_id; }
        if (location.pathname !== form.dataset.sessionUrl) history.replaceState(null, "", form.dataset.sessionUrl);
        say("Answer saved.");
      } else if (ev.event === "error") {
        state.finished = true;
        say((data.error && data.error.message) || "The answer failed.", true);
      }
    }

    say("Silvia is answering…");
    var response = await fetch("/api/chat/sessions/" + encodeURIComponent(form.dataset.sessionId) + "/turns/", {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream", "X-CSRFToken": csrf },
      body: JSON.stringify({ message: question })
    });
    if (!response.ok) { article.remove(); say(await errorText(response), true); return; }
    var attempts = 0;
    for (;;) {
      try { await readEvents(response, onEvent); } catch (e) { /* dropped: resume below */ }
      if (state.finished) break;
      if (!state.turnId || attempts >= MAX_RECONNECTS) { say("The connection was lost. Reload the page to see the answer once it is saved.", true); break; }
      attempts += 1;
      say("Reconnecting…");
      await new Promise(function (r) { setTimeout(r, 250 * attempts); });
      var headers = { Accept: "text/event-stream" };
      if (state.lastId !== null) headers["Last-Event-ID"] = state.lastId;
      try {
        response = await fetch("/api/chat/turns/" + encodeURIComponent(state.turnId) + "/events", { headers: headers, credentials: "same-origin" });
      } catch (e) { continue; }
      if (!response.ok) { say(await errorText(response), true); break; }
    }
    paint();
    article.removeAttribute("aria-busy");
  }

  form.addEventListener("submit", async function (event) {
    event.preventDefault();
    var question = input.value.trim();
    if (!question) { say("Type a question first.", true); return; }
    var button = form.querySelector("button[type=submit]");
    button.disabled = true; input.disabled = true;
    try { await ask(question); input.value = ""; }
    catch (e) { say("Could not reach the server. Try again.", true); }
    finally { button.disabled = false; input.disabled = false; input.focus(); }
  });
})();
