/* Citation chips in the browser, for turns that stream into the page.
 * The same rules as pages/presenters.py (chip_for_citation, answer_pieces)
 * and the same markup as templates/pages/_chip.html; a browser test checks
 * that both give equal chips for the same citations. See docs/targets.md#wire-format,
 * docs/turns.md#what-a-turn-stores and docs/pages.md. */
(function () {
  "use strict";

  var SAFE_URL = /^https?:\/\/[^\x00-\x20\x7f]+$/i;
  var FINNHUB_SOURCE = "silvia://market-data/finnhub";
  var PORTFOLIO_PATH = "/portfolio/";
  var LIBRARY = { tax_reference: 1, card_document: 1, mortgage_reference: 1 };

  function isObject(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }
  function has(o, k) { return Object.prototype.hasOwnProperty.call(o, k); }
  function str(v) { return typeof v === "string" ? v : ""; }
  function nonEmpty(v) { return typeof v === "string" && v !== ""; }
  function safeHref(v) { return typeof v === "string" && SAFE_URL.test(v) ? v : null; }
  function host(url) {
    var authority = url.slice(url.indexOf("://") + 3).split(/[/?#\\]/)[0];
    var h = authority.slice(authority.lastIndexOf("@") + 1);
    h = h.charAt(0) === "[" ? h.slice(0, h.indexOf("]") + 1) : h.split(":")[0];
    return h || url;
  }

  /* parse_citation_target: a target object, or null when it cannot be read. */
  function parseTarget(v) {
    if (!isObject(v) || typeof v.kind !== "string") return null;
    var kind = v.kind;
    if (kind === "analysis" || kind === "portfolio") return { kind: kind };
    if (kind === "web") return nonEmpty(v.url) ? { kind: kind, url: v.url } : null;
    if (has(LIBRARY, kind)) {
      if (!has(v, "url")) return null;
      return v.url === null || nonEmpty(v.url) ? { kind: kind, url: v.url } : null;
    }
    if (kind === "market_data") return nonEmpty(v.ticker) ? { kind: kind, ticker: v.ticker } : null;
    if (kind === "account") return nonEmpty(v.accountId) ? { kind: kind, accountId: v.accountId } : null;
    if (kind === "accounts") {
      if (!Array.isArray(v.accounts) || !v.accounts.length) return null;
      var ids = [];
      for (var i = 0; i < v.accounts.length; i++) {
        var ref = v.accounts[i];
        if (!isObject(ref) || !nonEmpty(ref.accountId)) return null;
        ids.push(ref.accountId);
      }
      return { kind: kind, accountIds: ids };
    }
    return null;
  }

  function accountPath(id) { return "/accounts/" + encodeURIComponent(id); }
  function nameOf(names, id) { return has(names, id) && typeof names[id] === "string" ? names[id] : ""; }

  function accountLinks(ids, names, title) {
    var labels = ids.map(function (id, i) {
      return nameOf(names, id) || (title || "Account") + " (" + (i + 1) + " of " + ids.length + ")";
    });
    var counts = {}, seen = {};
    labels.forEach(function (l) { counts[l] = (counts[l] || 0) + 1; });
    return labels.map(function (label, i) {
      if (counts[label] > 1) { seen[label] = (seen[label] || 0) + 1; label = label + " (" + seen[label] + ")"; }
      return { label: label, href: accountPath(ids[i]) };
    });
  }

  /* chip_for_citation: {kind, label, href, external, accounts, title, citedText}. */
  function chipFor(citation, names) {
    var e = isObject(citation) ? citation : {};
    var source = str(e.source), title = str(e.title), cited = str(e.cited_text);
    var t = parseTarget(e.target);
    var chip = { kind: "fallback", label: "", href: null, external: false, accounts: [], title: title, citedText: cited };
    if (!t) {
      chip.href = safeHref(source);
      chip.external = chip.href !== null;
      chip.label = title || (chip.href ? host(source) : source) || "Source";
    } else if (t.kind === "account") {
      chip.label = nameOf(names, t.accountId) || title || "Account";
      chip.href = accountPath(t.accountId);
    } else if (t.kind === "accounts") {
      chip.accounts = accountLinks(t.accountIds, names, title);
      chip.label = chip.accounts.length + " accounts";
    } else if (t.kind === "portfolio") {
      chip.label = "Your portfolio";
      chip.href = PORTFOLIO_PATH;
    } else if (t.kind === "market_data") {
      chip.label = t.ticker;
    } else if (t.kind === "analysis") {
      chip.label = source === FINNHUB_SOURCE ? "Live data" : "Analysis";
    } else {
      chip.href = safeHref(t.url);
      chip.external = chip.href !== null;
      chip.label = title || (chip.href ? host(t.url) : "") || source || "Document";
    }
    if (t) chip.kind = t.kind;
    return chip;
  }

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function quoteButton(chip, id) {
    return el("button", { type: "button", "class": "chip__quote", popovertarget: id, "aria-haspopup": "dialog",
      "aria-label": "Cited text: " + chip.label }, "\u201c\u201d");
  }

  /* The markup of templates/pages/_chip.html. */
  function renderChip(chip, id) {
    var root = el("span", { "class": "chip chip--" + chip.kind, "data-kind": chip.kind });
    if (chip.accounts.length) {
      root.append(el("button", { type: "button", "class": "chip__label", popovertarget: id, "aria-haspopup": "dialog" }, chip.label));
    } else if (chip.href) {
      var a = el("a", { "class": "chip__label", href: chip.href }, chip.label);
      if (chip.external) { a.target = "_blank"; a.rel = "noopener noreferrer"; }
      root.append(a, quoteButton(chip, id));
    } else {
      root.append(el("span", { "class": "chip__label" }, chip.label), quoteButton(chip, id));
    }
    var pop = el("span", { "class": "chip__pop", id: id, popover: "", role: "dialog", "aria-label": chip.label });
    pop.append(el("span", { "class": "chip__pop-title" }, chip.title || chip.label));
    if (chip.accounts.length) {
      var list = el("span", { "class": "chip__accounts", role: "list" });
      chip.accounts.forEach(function (l) {
        var item = el("span", { role: "listitem" });
        item.append(el("a", { href: l.href }, l.label));
        list.append(item);
      });
      pop.append(list);
    }
    pop.append(chip.citedText ? el("q", { "class": "chip__cited" }, chip.citedText)
      : el("span", { "class": "chip__cited chip__cited--none" }, "No cited text was stored."));
    pop.append(el("button", { type: "button", "class": "chip__close", popovertarget: id, popovertargetaction: "hide" }, "Close"));
    root.append(pop);
    return root;
  }

  function isOffset(v) { return typeof v === "number" && Number.isInteger(v); }
  function splitsPair(text, i) {
    if (i <= 0 || i >= text.length) return false;
    var a = text.charCodeAt(i - 1), b = text.charCodeAt(i);
    return a >= 0xd800 && a <= 0xdbff && b >= 0xdc00 && b <= 0xdfff;
  }

  /* answer_pieces: [{text, cited} | {chips}] and the chips of unusable spans. */
  function answerPieces(answer, inline, names) {
    var entries = Array.isArray(inline) ? inline : [];
    var placed = new Map(), spans = [], stray = [];
    entries.forEach(function (entry) {
      var chip = chipFor(entry, names);
      var s = isObject(entry) ? entry.start : null, e = isObject(entry) ? entry.end : null;
      if (!isOffset(s) || !isOffset(e) || s < 0 || s > e || e > answer.length || splitsPair(answer, s) || splitsPair(answer, e)) {
        stray.push(chip);
        return;
      }
      spans.push([s, e]);
      if (!placed.has(e)) placed.set(e, []);
      placed.get(e).push(chip);
    });
    var cutSet = new Set([0, answer.length]);
    spans.forEach(function (sp) { cutSet.add(sp[0]); cutSet.add(sp[1]); });
    var cuts = Array.from(cutSet).sort(function (a, b) { return a - b; });
    var pieces = [];
    for (var i = 0; i + 1 < cuts.length; i++) {
      var left = cuts[i], right = cuts[i + 1];
      if (placed.has(left)) { pieces.push({ chips: placed.get(left) }); placed.delete(left); }
      var covered = spans.some(function (sp) { return sp[0] <= left && right <= sp[1]; });
      pieces.push({ text: answer.slice(left, right), cited: covered });
    }
    Array.from(placed.keys()).sort(function (a, b) { return a - b; }).forEach(function (k) { pieces.push({ chips: placed.get(k) }); });
    return { pieces: pieces, stray: stray };
  }

  var counter = 0;
  function nextId() { counter += 1; return "live-chip-" + counter; }

  /* Fill `answerEl` (and `strayEl`, hidden when empty) with the answer and its chips. */
  function renderAnswer(answerEl, strayEl, answer, inline, names) {
    var result = answerPieces(answer, inline, names);
    var nodes = [];
    result.pieces.forEach(function (p) {
      if (p.chips) p.chips.forEach(function (c) { nodes.push(renderChip(c, nextId())); });
      else if (p.cited) nodes.push(el("mark", { "class": "cited" }, p.text));
      else nodes.push(document.createTextNode(p.text));
    });
    answerEl.replaceChildren.apply(answerEl, nodes);
    if (strayEl) {
      var chips = result.stray.map(function (c) { return renderChip(c, nextId()); });
      strayEl.hidden = chips.length === 0;
      strayEl.replaceChildren.apply(strayEl, [el("span", { "class": "stray__label" }, "Also cited:"), document.createTextNode(" ")].concat(chips));
    }
  }

  window.SilviaChips = { parseTarget: parseTarget, chipFor: chipFor, renderChip: renderChip, answerPieces: answerPieces, renderAnswer: renderAnswer, safeHref: safeHref };
})();
