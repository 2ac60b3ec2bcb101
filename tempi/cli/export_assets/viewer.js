// tempi's session viewer: moves between branches, recounts the branch's stats, searches.
// State lives in the URL hash (#entry=ID&q=TEXT) so every view can be linked to.
(function () {
  "use strict";
  var nodes = JSON.parse(document.getElementById("tempi-nodes").textContent);
  var defaultLeaf = document.body.getAttribute("data-leaf");
  var articles = Array.prototype.slice.call(document.querySelectorAll("#messages article.msg"));
  var items = Array.prototype.slice.call(document.querySelectorAll("#tree .node"));
  var itemById = {};
  items.forEach(function (item) { itemById[item.getAttribute("data-id")] = item; });
  var search = document.getElementById("search");
  var searchStatus = document.getElementById("search-status");
  var state = { entry: null, q: "" };

  function readHash() {
    var params = new URLSearchParams(location.hash.replace(/^#/, ""));
    state.entry = params.get("entry");
    state.q = params.get("q") || "";
  }

  function writeHash() {
    var params = new URLSearchParams();
    if (state.entry) params.set("entry", state.entry);
    if (state.q) params.set("q", state.q);
    var hash = params.toString();
    history.replaceState(null, "", hash ? "#" + hash : location.pathname + location.search);
  }

  function pathTo(leaf) {
    var ids = {};
    var seen = 0;
    while (leaf && Object.prototype.hasOwnProperty.call(nodes, leaf) && !ids[leaf] && seen < 1e6) {
      ids[leaf] = true;
      leaf = nodes[leaf][0];
      seen++;
    }
    return ids;
  }

  // --- numbers, formatted as export_stats.py formats them -----------------------------
  function fmtInt(n) { return Math.round(n).toLocaleString("en-US"); }
  function fmtCost(c) { return "$" + c.toFixed(4); }
  function fmtDuration(first, last) {
    if (first === null) return "\u2013";
    var s = Math.round((last - first) / 1000);
    function two(n) { return (n < 10 ? "0" : "") + n; }
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m " + two(s % 60) + "s";
    return Math.floor(s / 3600) + "h " + two(Math.floor((s % 3600) / 60)) + "m";
  }

  function setStat(key, text) {
    var cell = document.querySelector('#stats tr[data-stat="' + key + '"] td.branch');
    if (cell) cell.textContent = text;
  }

  function branchStats(path) {
    var t = { user: 0, assistant: 0, tools: 0, in: 0, out: 0, cr: 0, cw: 0, cost: 0 };
    articles.forEach(function (a) {
      if (!path[a.getAttribute("data-id")]) return;
      var role = a.getAttribute("data-role");
      if (role === "user") t.user++;
      if (role !== "assistant") return;
      t.assistant++;
      ["tools", "in", "out", "cr", "cw", "cost"].forEach(function (k) {
        t[k] += parseFloat(a.getAttribute("data-" + k)) || 0;
      });
    });
    var first = null, last = null;
    Object.keys(path).forEach(function (id) {
      var ms = nodes[id][1];
      if (ms > 0) {
        first = first === null ? ms : Math.min(first, ms);
        last = last === null ? ms : Math.max(last, ms);
      }
    });
    setStat("messages", fmtInt(t.user) + " / " + fmtInt(t.assistant));
    setStat("tools", fmtInt(t.tools));
    ["in", "out", "cr", "cw"].forEach(function (k) { setStat(k, fmtInt(t[k])); });
    setStat("cost", fmtCost(t.cost));
    setStat("duration", fmtDuration(first, last));
  }

  // --- search --------------------------------------------------------------------------
  function clearMarks() {
    Array.prototype.slice.call(document.querySelectorAll("mark.hit")).forEach(function (mark) {
      var parent = mark.parentNode;
      parent.replaceChild(document.createTextNode(mark.textContent), mark);
      parent.normalize();
    });
    Array.prototype.slice.call(document.querySelectorAll("details[data-search-opened]")).forEach(function (d) {
      d.open = false;
      d.removeAttribute("data-search-opened");
    });
  }

  function markIn(root, needle) {
    var walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, null);
    var found = [];
    var node;
    while ((node = walker.nextNode())) {
      if (node.nodeValue.toLowerCase().indexOf(needle) >= 0) found.push(node);
    }
    found.forEach(function (text) {
      var value = text.nodeValue;
      var lower = value.toLowerCase();
      var frag = document.createDocumentFragment();
      var pos = 0, at;
      while ((at = lower.indexOf(needle, pos)) >= 0) {
        frag.appendChild(document.createTextNode(value.slice(pos, at)));
        var mark = document.createElement("mark");
        mark.className = "hit";
        mark.textContent = value.slice(at, at + needle.length);
        frag.appendChild(mark);
        pos = at + needle.length;
      }
      frag.appendChild(document.createTextNode(value.slice(pos)));
      text.parentNode.replaceChild(frag, text);
    });
    // A hit inside folded output is opened so the reader sees it; closed again on clear.
    Array.prototype.slice.call(root.querySelectorAll("details")).forEach(function (d) {
      if (!d.open && d.querySelector("mark.hit")) {
        d.open = true;
        d.setAttribute("data-search-opened", "");
      }
    });
  }

  function applySearch(path) {
    clearMarks();
    var needle = state.q.trim().toLowerCase();
    if (search.value !== state.q) search.value = state.q;
    if (!needle) {
      articles.forEach(function (a) { a.classList.remove("miss"); });
      items.forEach(function (i) { i.classList.remove("miss", "hit"); });
      searchStatus.textContent = "";
      return;
    }
    var onPath = 0, onPathHits = 0, allHits = 0;
    articles.forEach(function (a) {
      var id = a.getAttribute("data-id");
      var hit = a.textContent.toLowerCase().indexOf(needle) >= 0;
      a.classList.toggle("miss", !hit);
      var item = itemById[id];
      if (item) {
        item.classList.toggle("miss", !hit);
        item.classList.toggle("hit", hit);
      }
      if (hit && item) allHits++;
      if (path[id] && item) {
        onPath++;
        if (hit) onPathHits++;
      }
      if (hit && path[id]) markIn(a, needle);
    });
    searchStatus.textContent = onPathHits + " of " + onPath + " messages on this branch match, " +
      allHits + " in the whole session";
  }

  // --- the branch on show ---------------------------------------------------------------
  function validTarget() {
    return state.entry && Object.prototype.hasOwnProperty.call(nodes, state.entry) ? state.entry : null;
  }

  // The branch through the chosen entry, down to its newest leaf; the session's own leaf
  // when nothing (or an unknown id) is chosen.
  function currentPath() {
    var target = validTarget();
    if (!target) return pathTo(defaultLeaf);
    return pathTo(itemById[target] ? itemById[target].getAttribute("data-leaf") : target);
  }

  function show(scroll) {
    var target = validTarget();
    var path = currentPath();
    articles.forEach(function (a) {
      var id = a.getAttribute("data-id");
      a.classList.toggle("off", !path[id]);
      a.classList.toggle("target", id === target);
    });
    items.forEach(function (item) {
      var id = item.getAttribute("data-id");
      item.classList.toggle("on-path", !!path[id]);
      item.classList.toggle("selected", id === target);
    });
    branchStats(path);
    applySearch(path);
    if (scroll && target) {
      var id = target;
      while (id && !document.getElementById("m-" + id)) id = nodes[id][0];
      var article = id && document.getElementById("m-" + id);
      if (article) article.scrollIntoView({ block: "start" });
      if (itemById[target]) itemById[target].scrollIntoView({ block: "nearest" });
    }
  }


  document.addEventListener("click", function (event) {
    var link = event.target.closest ? event.target.closest('a[data-id][href^="#entry="]') : null;
    if (!link) return;
    event.preventDefault();
    state.entry = link.getAttribute("data-id");
    writeHash();
    show(true);
  });

  Array.prototype.slice.call(document.querySelectorAll(".toolbar button[data-toggle]")).forEach(function (button) {
    var kind = button.getAttribute("data-toggle");
    var label = button.textContent;
    button.addEventListener("click", function () {
      var all = Array.prototype.slice.call(document.querySelectorAll("details." + kind));
      var open = all.some(function (d) { return !d.open; });
      all.forEach(function (d) { d.open = open; });
      button.textContent = open ? label.replace("Expand", "Collapse") : label.replace("Collapse", "Expand");
    });
  });

  search.addEventListener("input", function () {
    state.q = search.value;
    writeHash();
    applySearch(currentPath());
  });

  document.addEventListener("keydown", function (event) {
    if (event.key === "/" && document.activeElement !== search) {
      event.preventDefault();
      search.focus();
    } else if (event.key === "Escape" && document.activeElement === search) {
      state.q = "";
      writeHash();
      applySearch(currentPath());
    }
  });

  window.addEventListener("hashchange", function () { readHash(); show(true); });
  readHash();
  show(true);
})();
