/* Asking: post a question to the live-turn endpoint and show its SSE stream
 * (docs/live.md, docs/pages.md#asking).
 *
 * The server renders every state of the answer, so this file holds no
 * Markdown or chip rule: while the turn streams, the answer so far and its
 * citations go to /chat/answer-preview/ and the HTML comes back with the
 * chips in place; once `done`, the saved turn's own <article> (the one a
 * reload shows) replaces the live one. fetch() reads the POST's stream
 * (EventSource cannot POST); a dropped stream goes on with an EventSource
 * on the turn's events URL, which resumes after the last event id. */
(function () {
  "use strict";
  var form = document.getElementById("ask-form");
  if (!form) return;
  var input = document.getElementById("ask-input");
  var status = document.getElementById("ask-status");
  var turns = document.getElementById("turns");
  var stopButton = document.getElementById("ask-stop");
  var current = null; // the LiveTurn streaming now: what the Stop button stops
  var csrf = document.querySelector("input[name=csrfmiddlewaretoken]").value;
  var PREVIEW_URL = form.dataset.previewUrl;
  var EVENT_NAMES = ["turn", "text", "citation", "rewind", "citations_summary", "message", "done", "error"];
  var MAX_FAILURES = 5; // network errors in a row before the page gives up reconnecting

  function say(text, isError) {
    status.textContent = text;
    status.classList.toggle("ask__status--error", !!isError);
  }

  /* Read the SSE frames of a fetch() Response, calling onEvent(name, id, data) for each (the EventSource rules). */
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
          if (ev.data.length) onEvent(ev.event, ev.id, ev.data.join("\n"));
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

  /* Put `html` in `container`, keeping keyboard focus on the same control (by position) if it was inside. */
  function replaceKeepingFocus(container, html, outer) {
    var focusable = "a[href], button, [tabindex]";
    var before = Array.prototype.indexOf.call(container.querySelectorAll(focusable), document.activeElement);
    var target = container;
    if (outer) {
      var holder = document.createElement("template");
      holder.innerHTML = html.trim();
      target = holder.content.firstElementChild;
      container.replaceWith(target);
    } else {
      container.innerHTML = html;
    }
    if (before >= 0) {
      var again = target.querySelectorAll(focusable);
      if (again.length) again[Math.min(before, again.length - 1)].focus();
    }
    return target;
  }

  function newArticle(question) {
    var empty = document.getElementById("no-turns");
    if (empty) empty.remove();
    var article = document.createElement("article");
    article.className = "turn turn--live";
    article.setAttribute("aria-busy", "true");
    article.innerHTML = '<div class="turn__question"><h2 class="visually-hidden">Question</h2><p></p></div>' +
      '<div class="turn__answer"><h2 class="visually-hidden">Answer</h2><div class="turn__live"></div></div>';
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

  /* One live turn: what it received so far, and the rendering of it. */
  function LiveTurn(article) {
    this.article = article;
    this.box = article.querySelector(".turn__live");
    this.answer = "";
    this.cited = []; // {id, citation}: the event id each citation came with, for `rewind`
    this.turnId = null;
    this.lastId = null;
    this.logId = null;
    this.ended = false; // `done` or `error` received: never reconnect after it
    this.failed = false;
    this.rendering = false;
    this.dirty = false;
    this.pending = null; // HTML waiting for an open chip popover to close
    var self = this;
    this.box.addEventListener("toggle", function (e) {
      if (e.newState === "closed" && self.pending !== null) self.apply(self.pending);
    }, true); // toggle does not bubble: listen while it goes down
  }

  LiveTurn.prototype.onEvent = function (name, id, text) {
    var number = id === null || id === "" ? NaN : Number(id);
    if (Number.isFinite(number)) this.lastId = number;
    var data = null;
    try { data = JSON.parse(text); } catch (e) { /* leave null */ }
    if (name === "error") {
      // The turn's own `error` event: it carries {"error": {"type", "message"}}; show it and stop.
      this.ended = this.failed = true;
      var stopped = !!(data && data.error && data.error.type === "stopped");
      if (stopped) this.article.classList.add("turn--stopped"); // shown as it was; nothing of it is saved
      say((data && data.error && data.error.message) || "The answer failed. Please try again.", !stopped);
      return;
    }
    if (data === null) return;
    if (name === "turn") {
      this.turnId = data.turn_id;
      this.article.dataset.turnId = data.turn_id;
      if (stopButton) stopButton.hidden = false; // the turn has an id: it can be stopped
    } else if (name === "text") {
      this.answer += typeof data.text === "string" ? data.text : "";
      this.render();
    } else if (name === "citation") {
      this.cited.push({ id: this.lastId, citation: data.citation });
      this.render();
    } else if (name === "rewind") {
      // A resumed turn rolls back to event `to`: its answer is `answer`, later citations are dropped.
      var to = Number(data.to);
      if (typeof data.answer === "string") this.answer = data.answer;
      this.cited = this.cited.filter(function (c) { return c.id !== null && c.id <= to; });
      this.render();
    } else if (name === "done") {
      this.ended = true;
      this.logId = data.log_id || null;
    }
  };

  LiveTurn.prototype.apply = function (html) {
    if (this.box.querySelector(":popover-open")) { this.pending = html; return; }
    this.pending = null;
    replaceKeepingFocus(this.box, html, false);
  };

  /* Ask the server for the answer so far as HTML; one request at a time, the latest state wins. */
  LiveTurn.prototype.render = async function () {
    if (this.rendering) { this.dirty = true; return; }
    this.rendering = true;
    try {
      do {
        this.dirty = false;
        var body = JSON.stringify({ answer: this.answer, inline_citations: this.cited.map(function (c) { return c.citation; }) });
        var response = await fetch(PREVIEW_URL, {
          method: "POST", credentials: "same-origin",
          headers: { "Content-Type": "application/json", "X-CSRFToken": csrf }, body: body
        });
        if (!response.ok || response.redirected) break;
        var html = await response.text();
        if (!this.box.isConnected) break; // the saved turn replaced it
        this.apply(html);
      } while (this.dirty);
    } catch (e) {
      /* the next event renders again */
    } finally {
      this.rendering = false;
    }
  };

  /* A page opened untitled (before its first turn) takes the title the session was saved with, as a reload shows. */
  function showSessionTitle(encoded) {
    var heading = document.querySelector("h1[data-untitled]");
    if (!heading || !encoded) return;
    var title = decodeURIComponent(encoded);
    document.title = title + document.title.slice(heading.textContent.length);
    heading.textContent = title;
    heading.removeAttribute("data-untitled");
  }

  /* After `done`: the saved turn's article, exactly as a reload renders it, replaces the live one. */
  LiveTurn.prototype.finish = async function () {
    var url = form.dataset.sessionUrl + "turns/" + encodeURIComponent(this.logId) + "/";
    try {
      var response = await fetch(url, { credentials: "same-origin" });
      if (response.ok && !response.redirected) {
        showSessionTitle(response.headers.get("X-Session-Title"));
        var saved = replaceKeepingFocus(this.article, await response.text(), true);
        saved.classList.add("turn--live");
        this.article = saved;
        return true;
      }
    } catch (e) { /* below */ }
    return false;
  };

  /* Go on with the turn through an EventSource after the last event id; resolves when it ends or gives up. */
  LiveTurn.prototype.follow = function () {
    var self = this;
    var url = "/api/chat/turns/" + encodeURIComponent(this.turnId) + "/events";
    if (this.lastId !== null) url += "?after=" + this.lastId; // EventSource sends Last-Event-ID itself from then on
    return new Promise(function (resolve) {
      var source = new EventSource(url);
      var failures = 0;
      function end(ok) { source.close(); resolve(ok); }
      EVENT_NAMES.forEach(function (name) {
        source.addEventListener(name, function (e) {
          if (name === "error" && typeof e.data !== "string") {
            // A network error (no data), not the turn's `error` event. CLOSED: the server said no
            // (an HTTP error, or 204 when it has nothing more); else EventSource retries by itself.
            failures += 1;
            if (source.readyState === EventSource.CLOSED || failures > MAX_FAILURES) end(false);
            else say("Reconnecting…");
            return;
          }
          failures = 0;
          self.onEvent(name, e.lastEventId || null, e.data);
          if (self.ended) end(true);
        });
      });
    });
  };

  /* The Stop button: the server ends the turn (POST .../stop); its stream then ends with `error` "stopped". */
  if (stopButton) {
    stopButton.addEventListener("click", async function () {
      var turn = current;
      if (!turn || turn.turnId === null || turn.ended) return;
      stopButton.disabled = true;
      say("Stopping…");
      try {
        var response = await fetch("/api/chat/turns/" + encodeURIComponent(turn.turnId) + "/stop", {
          method: "POST", credentials: "same-origin", headers: { "X-CSRFToken": csrf }
        });
        // 409: it ended meanwhile (its own `done` or `error` says how); anything else is shown.
        if (!response.ok && response.status !== 409) say(await errorText(response), true);
      } catch (e) {
        say("Could not reach the server to stop the answer.", true);
      } finally {
        stopButton.disabled = false;
      }
    });
  }

  async function ask(question) {
    var turn = new LiveTurn(newArticle(question));
    current = turn;
    say("Silvia is answering…");
    var response = await fetch("/api/chat/sessions/" + encodeURIComponent(form.dataset.sessionId) + "/turns/", {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream", "X-CSRFToken": csrf },
      body: JSON.stringify({ message: question })
    });
    if (!response.ok) { turn.article.remove(); say(await errorText(response), true); return; }
    try { await readEvents(response, function (n, i, d) { turn.onEvent(n, i, d); }); } catch (e) { /* dropped */ }
    if (!turn.ended && turn.turnId !== null) {
      say("Reconnecting…");
      await turn.follow();
    }
    turn.article.removeAttribute("aria-busy");
    if (turn.failed) return;
    if (!turn.ended || turn.logId === null) {
      say("The connection was lost. Reload the page to see the answer once it is saved.", true);
      return;
    }
    if (location.pathname !== form.dataset.sessionUrl) history.replaceState(null, "", form.dataset.sessionUrl);
    var swapped = await turn.finish();
    say(swapped ? "Answer saved." : "Answer saved. Reload the page to see it.");
  }

  form.addEventListener("submit", async function (event) {
    event.preventDefault();
    var question = input.value.trim();
    if (!question) { say("Type a question first.", true); return; }
    var button = form.querySelector("button[type=submit]");
    button.disabled = true; input.disabled = true;
    try { await ask(question); input.value = ""; }
    catch (e) { say("Could not reach the server. Try again.", true); }
    finally {
      current = null;
      if (stopButton) stopButton.hidden = true;
      button.disabled = false; input.disabled = false; input.focus();
    }
  });
})();
