// dedup review: the list of shown groups, its filter and order, and one group's members and differences.
// Every id and text of the data goes into the page as text (textContent), never as markup.
"use strict";
(function () {
  var data = JSON.parse(document.getElementById("review-data").textContent);
  var groups = data.groups;
  var body = document.querySelector("#group-table tbody");
  var filterBox = document.getElementById("filter");
  var sortBox = document.getElementById("sort");
  var count = document.getElementById("count");
  var detail = document.getElementById("detail");
  var SAME = 0, REMOVED = 1, ADDED = 2, FOLDED = 3, CUT = 4;
  var layout = "inline";
  var chosen = null;

  function element(tag, className, text) {
    var made = document.createElement(tag);
    if (className) made.className = className;
    if (text !== undefined && text !== null) made.textContent = String(text);
    return made;
  }

  // An id that may break after each "/" (a long path wraps at its folders, not in the middle of a name).
  function idText(tag, className, text) {
    var made = element(tag, className);
    String(text).split("/").forEach(function (part, index, parts) {
      made.appendChild(document.createTextNode(part + (index < parts.length - 1 ? "/" : "")));
      if (index < parts.length - 1) made.appendChild(document.createElement("wbr"));
    });
    return made;
  }

  function fixed(value, digits) {
    return value === null || value === undefined ? "–" : Number(value).toFixed(digits === undefined ? 3 : digits);
  }

  function bytes(count) {
    if (count < 0) return "unknown";
    var units = [["GB", 1e9], ["MB", 1e6], ["kB", 1e3]];
    for (var i = 0; i < units.length; i++) {
      if (count >= units[i][1]) return (count / units[i][1]).toFixed(1) + " " + units[i][0];
    }
    return count + " B";
  }

  // Each group's ids, lower-cased once, for the filter.
  groups.forEach(function (group) {
    var ids = [group.kept];
    group.members.forEach(function (member) { ids.push(member.id); });
    group.listed.forEach(function (member) { ids.push(member.id); });
    group.search = ids.join("\n").toLowerCase();
  });

  var orders = {
    size: function (a, b) { return b.size - a.size || a.number - b.number; },
    weakest: function (a, b) {
      var x = a.weakest === null ? 2 : a.weakest, y = b.weakest === null ? 2 : b.weakest;
      return x - y || a.number - b.number;
    },
    bytes: function (a, b) { return b.bytes - a.bytes || a.number - b.number; },
    number: function (a, b) { return a.number - b.number; }
  };

  function row(group) {
    var tr = element("tr");
    tr.dataset.group = group.number;
    tr.setAttribute("aria-selected", chosen === group ? "true" : "false");
    var name = element("td");
    var button = element("button", "", group.number);
    button.type = "button";
    button.setAttribute("aria-label", "show group " + group.number);
    name.appendChild(button);
    if (group.sampled) name.appendChild(element("span", "sampled", " sampled"));
    tr.appendChild(name);
    tr.appendChild(element("td", "n", group.size));
    tr.appendChild(element("td", "n", fixed(group.weakest)));
    tr.appendChild(element("td", "n", group.drop));
    tr.appendChild(element("td", "n", bytes(group.bytes)));
    tr.appendChild(idText("td", "id", group.kept));
    tr.addEventListener("click", function () { show(group, true); });
    return tr;
  }

  function list() {
    var wanted = filterBox.value.trim().toLowerCase();
    var shown = groups.filter(function (group) { return !wanted || group.search.indexOf(wanted) >= 0; });
    shown.sort(orders[sortBox.value] || orders.size);
    var rows = document.createDocumentFragment();
    shown.forEach(function (group) { rows.appendChild(row(group)); });
    body.replaceChildren(rows);
    count.textContent = shown.length + " of " + groups.length + " groups shown";
  }

  function similarityText(similarity) {
    var words;
    if (similarity.kind === "self") return "the representative";
    if (similarity.kind === "unknown") {
      words = "not compared with the representative";
    } else if (similarity.estimate !== undefined) {
      words = "R̂ " + fixed(similarity.estimate);
      if (similarity.ci_low !== undefined) {
        words += " [" + fixed(similarity.ci_low) + ", " + fixed(similarity.ci_high) + "] (95 %)";
      }
      if (similarity.exact !== undefined) words += "; exact " + fixed(similarity.exact) + " (checked)";
    } else {
      words = "exact " + fixed(similarity.exact) + " (checked)";
    }
    if (similarity.kind === "scored") {
      words += "; find never decided this pair (not a candidate, or not accepted): scored here from the signatures";
    }
    if (similarity.link) {
      words += "; in the group through " + similarity.link[0] + " (R " + fixed(similarity.link[1]) + ")";
    }
    return words;
  }

  function facts(member) {
    var parts = [member.shingles.toLocaleString("en") + " shingles", bytes(member.bytes)];
    if (member.run !== undefined) parts.push("sign run " + member.run);
    if (member.modified !== undefined) parts.push("modified " + member.modified);
    if (member.store !== undefined) parts.push(member.store + " store");
    return parts.join(" · ");
  }

  function segments(view, side) {
    // side: "both" (inline), "first" (the representative's words) or "second" (the member's)
    var out = element("div", "diff");
    view.segments.forEach(function (segment) {
      var kind = segment[0], value = segment[1];
      if (kind === SAME) {
        out.appendChild(document.createTextNode(value));
      } else if (kind === REMOVED && side !== "second") {
        out.appendChild(element("del", "", value));
      } else if (kind === ADDED && side !== "first") {
        out.appendChild(element("ins", "", value));
      } else if (kind === FOLDED) {
        out.appendChild(element("span", "fold", " ⋯ " + value.toLocaleString("en") + " unchanged words ⋯ "));
      } else if (kind === CUT) {
        out.appendChild(element("span", "cut", " … " + value.toLocaleString("en") + " more differences not shown ("
          + data.text_limit.toLocaleString("en") + " characters a member)"));
      }
    });
    return out;
  }

  function textOf(member) {
    var view = member.view, box = element("div");
    if (!view) return box;
    if (view.kind === "text") {
      if (view.reason) box.appendChild(element("p", "problem", view.reason.charAt(0).toUpperCase() + view.reason.slice(1) + "."));
      box.appendChild(element("div", "text", view.text));
      if (view.left_out) {
        box.appendChild(element("p", "note", "… " + view.left_out.toLocaleString("en") + " more characters not shown"));
      }
    } else if (view.kind === "same-bytes") {
      box.appendChild(element("p", "note", "The same bytes as the representative (the same content hash when signed)."));
    } else if (view.kind === "unread" || view.kind === "left-out") {
      box.appendChild(element("p", "problem", "Text not shown: " + view.reason));
    } else if (view.kind === "diff") {
      var said = view.changes === 0 ? "The same words as the representative (white space aside)"
        : view.changes + " differences: " + view.removed + " words of the representative removed, " + view.added
          + " added";
      if (view.truncated) said += "; only the first " + view.compared[0] + " and " + view.compared[1] + " words compared";
      box.appendChild(element("p", "note", said + "."));
      if (layout === "inline" || view.changes === 0) {
        box.appendChild(segments(view, "both"));
      } else {
        var sides = element("div", "sides");
        sides.appendChild(segments(view, "first"));
        sides.appendChild(segments(view, "second"));
        box.appendChild(sides);
      }
    }
    return box;
  }

  function memberBlock(member) {
    var block = element("div", "member");
    block.dataset.id = member.id;
    var head = element("div", "head");
    head.appendChild(element("span", "badge " + member.action, member.action));
    head.appendChild(idText("code", "id", member.id));
    block.appendChild(head);
    block.appendChild(element("div", "similarity", similarityText(member.similarity)));
    block.appendChild(element("div", "facts", facts(member)));
    block.appendChild(textOf(member));
    return block;
  }

  function listedTable(group) {
    var table = element("table", "listed");
    var head = element("tr");
    ["member", "action", "against the representative"].forEach(function (name) { head.appendChild(element("th", "", name)); });
    table.appendChild(head);
    group.listed.forEach(function (member) {
      var tr = element("tr");
      tr.appendChild(idText("td", "id", member.id));
      tr.appendChild(element("td", "", member.action));
      tr.appendChild(element("td", "", similarityText(member.similarity)));
      table.appendChild(tr);
    });
    return table;
  }

  function toolbar(group) {
    var bar = element("div", "toolbar");
    [["inline", "inline"], ["sides", "side by side"]].forEach(function (choice) {
      var button = element("button", "", choice[1]);
      button.type = "button";
      button.setAttribute("aria-pressed", layout === choice[0] ? "true" : "false");
      button.addEventListener("click", function () { layout = choice[0]; show(group, false); });
      bar.appendChild(button);
    });
    return bar;
  }

  function show(group, remember) {
    chosen = group;
    body.querySelectorAll("tr").forEach(function (tr) {
      tr.setAttribute("aria-selected", tr.dataset.group === String(group.number) ? "true" : "false");
    });
    var parts = document.createDocumentFragment();
    parts.appendChild(element("h3", "", "Group " + group.number + ": " + group.size + " members, weakest link "
      + fixed(group.weakest) + ", " + group.drop + " to drop (" + bytes(group.bytes) + ")"));
    parts.appendChild(element("p", "why", "Kept: " + group.kept + ". Why: " + group.why + "."));
    parts.appendChild(toolbar(group));
    group.members.forEach(function (member) { parts.appendChild(memberBlock(member)); });
    if (group.listed.length) {
      parts.appendChild(element("h3", "", "The other members"));
      parts.appendChild(listedTable(group));
    }
    if (group.unlisted) {
      parts.appendChild(element("p", "note", "… and " + group.unlisted.toLocaleString("en") + " more members, not listed."));
    }
    detail.replaceChildren(parts);
    if (remember && history.replaceState) history.replaceState(null, "", "#group-" + group.number);
  }

  filterBox.addEventListener("input", list);
  sortBox.addEventListener("change", list);
  list();
  var named = /^#group-(\d+)$/.exec(location.hash);
  if (named) {
    var found = groups.filter(function (group) { return String(group.number) === named[1]; })[0];
    if (found) show(found, false);
  }
})();
