// tempi web: the overview table and one session's live transcript. The server renders every
// message with the HTML export's renderer; this script only places the blocks it sends.
(function () {
  "use strict";
  var page = document.body.getAttribute("data-page");

  function fmtInt(n) { return Math.round(n).toLocaleString("en-US"); }
  function fmtCost(c) { return "$" + c.toFixed(4); }
  function age(iso) {
    var s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
    if (s < 60) return Math.round(s) + " s";
    if (s < 3600) return Math.round(s / 60) + " min";
    if (s < 86400) return Math.round(s / 3600) + " h";
    return Math.round(s / 86400) + " d";
  }
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }
  // A control, sent as the page's own request; its refusal is shown in `problem`.
  function postJSON(url, body, problem) {
    problem.textContent = "";
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body || {}),
    }).then(function (r) {
      return r.json().then(function (answer) {
        if (!r.ok) throw new Error(answer.error || r.statusText);
        return answer;
      });
    }).catch(function (err) { problem.textContent = err.message; throw err; });
  }
  function info() {
    return fetch("/api/info", { credentials: "same-origin" }).then(function (r) { return r.json(); })
      .then(function (i) {
        if (i.readOnly) document.body.classList.add("read-only");
        return i;
      });
  }

  // A session's live transcript: the server sends each message as the export renders it
  // (a block per key, sent again whole when it changes); this only places the blocks. Used
  // by the session page and by a pipeline's shard panel. `on` hears offline, reset and state.
  function follow(url, messages, scroller, on) {
    var blocks = {};
    function stickToBottom() {
      return scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 80;
    }
    function place(key, html) {
      var old = blocks[key];
      var holder = document.createElement("div");
      holder.innerHTML = html;
      var node = holder.firstElementChild || el("div", "gone");
      node.setAttribute("data-key", key);
      if (old) {
        // Keep what the reader unfolded open across re-renders of the same message.
        var open = Array.prototype.map.call(old.querySelectorAll("details"), function (d) { return d.open; });
        old.replaceWith(node);
        node.querySelectorAll("details").forEach(function (d, i) { if (open[i]) d.open = true; });
      } else {
        messages.appendChild(node);
      }
      blocks[key] = node;
    }
    function apply(op) {
      if (op.op === "offline") { on.offline(true); return; }
      on.offline(false);
      if (op.op === "reset") { messages.replaceChildren(); blocks = {}; on.reset(); }
      else if (op.op === "block") place(op.key, op.html);
      else if (op.op === "state") on.state(op);
    }
    var source = new EventSource(url);
    source.onmessage = function (e) {
      var bottom = stickToBottom();
      apply(JSON.parse(e.data));
      if (bottom) scroller.scrollTop = 1e9;
    };
    source.onerror = function () { on.offline(true); };
    return source;
  }

  // --- overview --------------------------------------------------------------------------
  function overview() {
    var filter = document.getElementById("filter");
    var body = document.querySelector("#sessions tbody");
    var count = document.getElementById("count");
    var problem = document.getElementById("problem");
    var rows = [];

    function haystack(s) {
      return [s.id, s.name, s.cwd, s.model, s.status, s.firstMessage].join(" ").toLowerCase();
    }
    function render() {
      var q = filter.value.trim().toLowerCase();
      var shown = rows.filter(function (s) { return !q || haystack(s).indexOf(q) >= 0; });
      var fragment = document.createDocumentFragment();
      shown.forEach(function (s) {
        var tr = el("tr");
        tr.setAttribute("data-id", s.id);
        var first = el("td");
        var link = el("a", "open", s.name || s.id.slice(0, 8));
        link.href = "/s/" + encodeURIComponent(s.id);
        first.appendChild(link);
        first.appendChild(el("span", "first", s.firstMessage || ""));
        tr.appendChild(first);
        var status = el("td");
        status.appendChild(el("span", "status " + s.status, s.status));
        tr.appendChild(status);
        tr.appendChild(el("td", "cwd", s.cwd));
        tr.appendChild(el("td", "model", s.model || "–"));
        tr.appendChild(el("td", "age", age(s.modified)));
        tr.appendChild(el("td", "num turns", fmtInt(s.turns)));
        tr.appendChild(el("td", "num tokens", fmtInt(s.tokens)));
        tr.appendChild(el("td", "num cost", fmtCost(s.cost)));
        fragment.appendChild(tr);
      });
      body.replaceChildren(fragment);
      count.textContent = shown.length === rows.length ? rows.length + " sessions" : shown.length + " of " + rows.length;
    }
    function totals(id, list, label) {
      var fragment = document.createDocumentFragment();
      (list || []).forEach(function (t) {
        var tr = el("tr");
        tr.appendChild(el("td", "", t[label] || "–"));
        tr.appendChild(el("td", "num", fmtInt(t.sessions)));
        tr.appendChild(el("td", "num", fmtInt(t.tokens)));
        tr.appendChild(el("td", "num", fmtCost(t.cost)));
        fragment.appendChild(tr);
      });
      document.querySelector("#" + id + " tbody").replaceChildren(fragment);
    }
    function pipelines(list) {
      document.getElementById("pipelines-section").hidden = !list.length;
      var fragment = document.createDocumentFragment();
      list.forEach(function (p) {
        var tr = el("tr");
        tr.setAttribute("data-id", p.id);
        var first = el("td");
        var link = el("a", "open", p.id);
        link.href = "/p/" + encodeURIComponent(p.id);
        first.appendChild(link);
        tr.appendChild(first);
        tr.appendChild(el("td", "", p.status));
        tr.appendChild(el("td", "", p.summary || "–"));
        tr.appendChild(el("td", "age", age(p.started)));
        tr.appendChild(el("td", "num", p.cost === null ? "–" : fmtCost(p.cost)));
        fragment.appendChild(tr);
      });
      document.querySelector("#pipelines tbody").replaceChildren(fragment);
    }
    function slack(list) {
      document.getElementById("slack-section").hidden = !list.length;
      var fragment = document.createDocumentFragment();
      list.forEach(function (c) {
        var tr = el("tr");
        tr.setAttribute("data-id", c.id);
        tr.appendChild(el("td", "mono", c.channel || c.id));
        tr.appendChild(el("td", "mono", c.thread || (c.mode === "channel" ? "whole channel" : "–")));
        var state = el("td");
        state.appendChild(el("span", "status " + c.state, c.state + (c.for.length ? " (for " + c.for.join(", ") + ")" : "")));
        tr.appendChild(state);
        tr.appendChild(el("td", "age", age(c.lastActivity)));
        var session = el("td");
        if (c.session) {
          var link = el("a", "open", c.session.slice(0, 8));
          link.href = "/s/" + encodeURIComponent(c.session);
          session.appendChild(link);
        }
        tr.appendChild(session);
        fragment.appendChild(tr);
      });
      document.querySelector("#slack tbody").replaceChildren(fragment);
    }
    function load() {
      fetch("/api/slack", { credentials: "same-origin" })
        .then(function (r) { return r.json(); })
        .then(function (data) { slack(data.conversations || []); }, function () {});
      fetch("/api/pipelines", { credentials: "same-origin" })
        .then(function (r) { return r.json(); })
        .then(function (data) { pipelines(data.pipelines || []); }, function () {});
      return fetch("/api/sessions", { credentials: "same-origin" })
        .then(function (r) { return r.json(); })
        .then(function (data) {
          rows = data.sessions || [];
          problem.textContent = "";
          render();
          totals("by-day", data.totals && data.totals.byDay, "day");
          totals("by-model", data.totals && data.totals.byModel, "model");
        })
        .catch(function (err) { problem.textContent = "cannot list sessions: " + err; });
    }
    filter.addEventListener("input", render);
    document.addEventListener("keydown", function (e) {
      if (e.key === "/" && document.activeElement !== filter) { e.preventDefault(); filter.focus(); }
    });
    info().then(function (i) { if (i.readOnly) document.getElementById("mode").textContent = "read-only"; });
    load();
    setInterval(load, 5000);
  }

  // --- one session -------------------------------------------------------------------------
  function session() {
    var id = decodeURIComponent(location.pathname.replace(/^\/s\//, ""));
    var base = "/api/sessions/" + encodeURIComponent(id);
    var messages = document.getElementById("messages");
    var statusEl = document.getElementById("status");
    var problem = document.getElementById("problem");
    var text = document.getElementById("text");
    var state = { running: false, streaming: false };

    function showState() {
      var label = !state.running ? "not running" : state.streaming ? "working" : "idle";
      statusEl.textContent = label;
      statusEl.className = "status " + (!state.running ? "finished" : state.streaming ? "working" : "idle");
      document.getElementById("send").disabled = !state.running;
      document.getElementById("steer").disabled = !state.running || !state.streaming;
      document.getElementById("follow-up").disabled = !state.running || !state.streaming;
      document.getElementById("abort").disabled = !state.running || !state.streaming;
      treeButtons();
    }
    var offline = document.getElementById("offline");
    function unavailable(yes) {
      // The transcript stays as it was; the stream starts again from a reset once it can.
      offline.hidden = !yes;
      document.body.classList.toggle("offline", yes);
    }

    // The session's tree, drawn by the export's renderer; a chosen entry can become the
    // session's leaf (/tree) or the end of a new session's branch (/fork).
    var tree = document.getElementById("tree");
    var chosen = null;
    var treeAsked = 0;
    function markTree(answer) {
      var onPath = {};
      (answer.path || []).forEach(function (p) { onPath[p] = true; });
      var last = null;
      tree.querySelectorAll(".node").forEach(function (node) {
        var nodeId = node.getAttribute("data-id");
        node.classList.toggle("on-path", !!onPath[nodeId]);
        node.classList.toggle("selected", nodeId === chosen);
        node.classList.remove("leaf");
        if (onPath[nodeId]) last = node;
      });
      if (last) last.classList.add("leaf");
    }
    function treeButtons() {
      var can = state.running && !state.streaming && chosen !== null;
      document.getElementById("switch").disabled = !can;
      document.getElementById("fork").disabled = !can;
    }
    function loadTree() {
      var asked = ++treeAsked;
      return fetch(base + "/tree", { credentials: "same-origin" }).then(function (r) { return r.json(); })
        .then(function (answer) {
          if (asked !== treeAsked) return;  // a newer answer is on its way
          tree.innerHTML = answer.html || "";
          document.getElementById("tree-title").textContent = answer.title || "";
          if (chosen !== null && !tree.querySelector('.node[data-id="' + CSS.escape(chosen) + '"]')) chosen = null;
          markTree(answer);
          treeButtons();
        }, function () {});
    }
    tree.addEventListener("click", function (e) {
      var node = e.target.closest(".node");
      if (!node) return;
      e.preventDefault();
      chosen = node.getAttribute("data-id");
      tree.querySelectorAll(".node").forEach(function (n) { n.classList.toggle("selected", n === node); });
      treeButtons();
    });
    document.getElementById("switch").addEventListener("click", function () {
      if (chosen === null) return;
      var summarize = document.getElementById("summarize").checked;
      post("/navigate", { entryId: chosen, summarize: summarize }).then(function (answer) {
        if (answer.editorText && !text.value.trim()) text.value = answer.editorText;
        chosen = null;
        loadTree();
      }, function () {});
    });
    document.getElementById("fork").addEventListener("click", function () {
      if (chosen === null) return;
      post("/fork", { entryId: chosen }).then(function (answer) {
        if (answer.editorText) sessionStorage.setItem("tempi-compose-" + answer.id, answer.editorText);
        location.href = "/s/" + encodeURIComponent(answer.id);
      }, function () {});
    });
    var composed = sessionStorage.getItem("tempi-compose-" + id);
    if (composed !== null) {
      sessionStorage.removeItem("tempi-compose-" + id);
      text.value = composed;
    }
    function post(path, body) {
      return postJSON(base + path, body, problem);
    }
    function send(how) {
      var message = text.value;
      if (!message.trim()) return;
      // While a run goes, the plain send queues the message for its end, as pi's Enter does.
      if (how === "prompt" && state.streaming) how = "followUp";
      post("/send", { text: message, as: how }).then(function () { text.value = ""; }, function () {});
    }
    document.getElementById("composer").addEventListener("submit", function (e) { e.preventDefault(); send("prompt"); });
    document.getElementById("steer").addEventListener("click", function () { send("steer"); });
    document.getElementById("follow-up").addEventListener("click", function () { send("followUp"); });
    document.getElementById("abort").addEventListener("click", function () { post("/abort").catch(function () {}); });
    text.addEventListener("keydown", function (e) {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); send("prompt"); }
    });
    document.querySelectorAll(".toolbar [data-toggle]").forEach(function (button) {
      var open = false;
      button.addEventListener("click", function () {
        open = !open;
        var kind = button.getAttribute("data-toggle");
        messages.querySelectorAll("details." + kind).forEach(function (d) { d.open = open; });
        button.textContent = (open ? "Collapse " : "Expand ") + (kind === "tool" ? "tool calls" : "thinking");
      });
    });
    var modelSelect = document.getElementById("model");
    var thinkingSelect = document.getElementById("thinking");
    function options(select, values, current) {
      select.replaceChildren();
      values.forEach(function (v) {
        var option = el("option", "", v.label);
        option.value = v.value;
        if (v.value === current) option.selected = true;
        select.appendChild(option);
      });
    }
    function describe() {
      return fetch(base, { credentials: "same-origin" }).then(function (r) { return r.json(); }).then(function (s) {
        var title = s.name || "Session " + String(s.id || id).slice(0, 8);
        document.getElementById("title").textContent = title;
        document.title = title + " · tempi";
        document.getElementById("meta").textContent = [s.id, s.cwd].filter(Boolean).join(" · ");
        modelSelect.disabled = thinkingSelect.disabled = !s.running;
        document.getElementById("compact").disabled = !s.running;
        options(thinkingSelect, (s.levels || []).map(function (l) { return { value: l, label: "thinking " + l }; }), s.thinkingLevel);
        return fetch("/api/models", { credentials: "same-origin" }).then(function (r) { return r.json(); }).then(function (m) {
          var list = (m.models || []).map(function (x) { return { value: x.provider + "/" + x.id, label: x.provider + "/" + x.id }; });
          if (s.model && !list.some(function (x) { return x.value === s.model; })) list.unshift({ value: s.model, label: s.model });
          options(modelSelect, list, s.model);
        });
      });
    }
    modelSelect.addEventListener("change", function () {
      var at = modelSelect.value.indexOf("/");
      post("/model", { provider: modelSelect.value.slice(0, at), id: modelSelect.value.slice(at + 1) })
        .then(describe, describe);
    });
    thinkingSelect.addEventListener("change", function () {
      post("/thinking", { level: thinkingSelect.value }).then(describe, describe);
    });
    document.getElementById("compact").addEventListener("click", function () {
      var button = document.getElementById("compact");
      button.disabled = true;
      button.textContent = "Compacting…";
      post("/compact", {}).then(function () {}, function () {}).then(function () {
        button.textContent = "Compact";
        button.disabled = !state.running;
      });
    });
    document.getElementById("export").href = base + "/export";
    info();
    describe();
    showState();
    follow(base + "/events", messages, document.getElementById("content"), {
      offline: unavailable,
      reset: function () { loadTree(); },
      state: function (op) {
        var ended = state.streaming && !op.streaming;
        state.running = op.running;
        state.streaming = !!op.streaming;
        showState();
        if (ended) loadTree();
      },
    });
  }

  // --- one pipeline ------------------------------------------------------------------------
  function pipeline() {
    var id = decodeURIComponent(location.pathname.replace(/^\/p\//, ""));
    var base = "/api/pipelines/" + encodeURIComponent(id);
    var problem = document.getElementById("problem");
    var body = document.querySelector("#shards tbody");
    var concurrency = document.getElementById("concurrency");

    function act(body) {
      return postJSON(base + "/control", body, problem).then(function (answer) {
        document.getElementById("summary").textContent = answer.said;
        return load();
      }, function () {});
    }
    function render(p) {
      document.getElementById("title").textContent = p.name || p.id;
      document.title = (p.name || p.id) + " · tempi";
      var statusEl = document.getElementById("status");
      statusEl.textContent = p.status;
      statusEl.className = "status " + (p.running ? (p.paused ? "idle" : "working") : "finished");
      document.getElementById("meta").textContent = [p.id, p.branch, p.phase].filter(Boolean).join(" · ");
      document.getElementById("summary").textContent =
        (p.summary || "") + (p.cost !== null ? " · " + fmtCost(p.cost) : "");
      ["pause", "resume", "cancel", "set-concurrency"].forEach(function (b) {
        document.getElementById(b).disabled = !p.running;
      });
      document.getElementById("pause").disabled = !p.running || p.paused;
      document.getElementById("resume").disabled = !p.running || !p.paused;
      if (document.activeElement !== concurrency && p.concurrency) concurrency.value = p.concurrency;
      var fragment = document.createDocumentFragment();
      p.shardRows.forEach(function (s) {
        var tr = el("tr");
        tr.setAttribute("data-shard", s.id);
        tr.appendChild(el("td", "num", s.index));
        var files = el("td", "mono", s.files.join(" "));
        if (s.reason) files.appendChild(el("span", "reason", s.reason));
        tr.appendChild(files);
        var state = el("td");
        state.appendChild(el("span", "status " + s.state, s.state));
        tr.appendChild(state);
        tr.appendChild(el("td", "num", s.repairs));
        tr.appendChild(el("td", "num", s.retries));
        tr.appendChild(el("td", "num", s.turns));
        tr.appendChild(el("td", "num", fmtCost(s.cost)));
        tr.appendChild(el("td", "mono", s.commit ? s.commit.slice(0, 10) : ""));
        var session = el("td");
        if (s.session) {
          var link = el("a", "", s.session.slice(0, 8));
          link.href = "/s/" + encodeURIComponent(s.session);
          session.appendChild(link);
        }
        tr.appendChild(session);
        var controls = el("td");
        if (s.session && s.workflow) {
          var watch = el("button", "watch", watching && watching.session === s.session ? "Watching" : "Watch");
          watch.addEventListener("click", function () { watchShard(s); });
          controls.appendChild(watch);
        }
        if (p.running && (s.state === "failed" || s.state === "conflict")) {
          var retry = el("button", "retry", "Retry");
          retry.addEventListener("click", function () { act({ action: "retry", shard: s.id }); });
          controls.appendChild(retry);
        }
        if (p.running && s.state === "pending") {
          var skip = el("button", "skip", "Skip");
          skip.addEventListener("click", function () { act({ action: "skip", shard: s.id }); });
          controls.appendChild(skip);
        }
        tr.appendChild(controls);
        fragment.appendChild(tr);
      });
      body.replaceChildren(fragment);
      if (p.running !== wasRunning) { wasRunning = p.running; loadReports(); }
    }

    // A running shard's session, live in a panel under the table (the session page's stream).
    var watching = null;
    var panel = document.getElementById("shard-panel");
    var shardMessages = document.getElementById("shard-messages");
    function watchShard(s) {
      if (watching) watching.source.close();
      shardMessages.replaceChildren();
      var url = "/api/sessions/" + encodeURIComponent(s.session) + "/events?workflow=" + encodeURIComponent(s.workflow);
      var shardStatus = document.getElementById("shard-status");
      var source = follow(url, shardMessages, panel, {
        offline: function (yes) { if (yes) shardStatus.textContent = "reconnecting…"; },
        reset: function () {},
        state: function (op) {
          shardStatus.textContent = !op.running ? "finished" : op.streaming ? "working" : "idle";
          shardStatus.className = "status " + (!op.running ? "finished" : op.streaming ? "working" : "idle");
        },
      });
      watching = { session: s.session, source: source };
      document.getElementById("shard-title").textContent = "Shard " + s.index + ": " + s.files.join(" ");
      var open = document.getElementById("shard-open");
      open.href = "/s/" + encodeURIComponent(s.session);
      panel.hidden = false;
      body.querySelectorAll("button.watch").forEach(function (b) { b.textContent = "Watch"; });
      var row = body.querySelector('tr[data-shard="' + CSS.escape(s.id) + '"] button.watch');
      if (row) row.textContent = "Watching";
    }
    document.getElementById("shard-close").addEventListener("click", function () {
      if (watching) watching.source.close();
      watching = null;
      panel.hidden = true;
      body.querySelectorAll("button.watch").forEach(function (b) { b.textContent = "Watch"; });
    });

    // The reports `tempi pipeline run`/`wait` wrote once the pipeline finished.
    var wasRunning = null;
    function loadReports() {
      return fetch(base + "/reports", { credentials: "same-origin" }).then(function (r) { return r.json(); })
        .then(function (reports) {
          var section = document.getElementById("reports");
          var links = document.getElementById("report-links");
          links.replaceChildren();
          (reports.downloads || []).forEach(function (kind) {
            var a = el("a", "", kind === "junit" ? "JUnit XML" : "JSON summary");
            a.href = base + "/reports/" + kind;
            a.setAttribute("download", "");
            links.appendChild(a);
          });
          var summary = document.getElementById("report-summary");
          summary.innerHTML = reports.markdownHtml || "";
          section.hidden = !reports.markdownHtml && !(reports.downloads || []).length;
        }, function () {});
    }
    function load() {
      return fetch(base, { credentials: "same-origin" }).then(function (r) {
        if (!r.ok) return r.text().then(function (t) { throw new Error(t); });
        return r.json();
      }).then(render, function (err) { problem.textContent = err.message; });
    }
    document.getElementById("pause").addEventListener("click", function () { act({ action: "pause" }); });
    document.getElementById("resume").addEventListener("click", function () { act({ action: "resume" }); });
    document.getElementById("set-concurrency").addEventListener("click", function () {
      act({ action: "concurrency", value: parseInt(concurrency.value, 10) });
    });
    document.getElementById("cancel").addEventListener("click", function () {
      if (window.confirm("Cancel this pipeline? Running shards stop; committed ones stay.")) act({ action: "cancel" });
    });
    info();
    load();
    setInterval(load, 2000);
  }

  if (page === "overview") overview();
  else if (page === "pipeline") pipeline();
  else if (page === "session") session();
})();
