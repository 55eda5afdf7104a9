// Live dashboard: the server says "update" on its event stream; the page then fetches the
// changing part (/live) and swaps it in. Every minute it refreshes anyway, so "last report"
// times and the stuck list age without events.
(function () {
  "use strict";
  var live = document.getElementById("live");
  var conn = document.getElementById("conn");
  if (!live || !window.EventSource || !window.fetch) {
    return;
  }
  var busy = false;
  var again = false;
  function refresh() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    fetch("/live", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (r.status === 401 || r.status === 403) {
          window.location.assign("/login");
        }
        if (!r.ok) {
          throw new Error("HTTP " + r.status);
        }
        return r.text();
      })
      .then(function (html) {
        live.innerHTML = html;
      })
      .catch(function () {})
      .then(function () {
        busy = false;
        if (again) {
          again = false;
          refresh();
        }
      });
  }
  function state(name, text) {
    conn.className = "conn " + name;
    conn.textContent = text;
  }
  var lost = false;
  state("wait", "connecting…");
  var events = new EventSource("/events");
  events.addEventListener("update", refresh);
  events.onopen = function () {
    state("on", "live");
    if (lost) {
      lost = false;
      refresh(); // updates may have been missed while away
    }
  };
  events.onerror = function () {
    lost = true;
    state("off", "reconnecting…");
  };
  window.setInterval(refresh, 60000);
})();
