// Refresh each element marked data-poll with the server-rendered HTML at its URL, every
// data-poll-every milliseconds (5 seconds unless it says). A reply marked X-Poll-Stop
// means what the page shows came to rest: the page is loaded once more, whole (its forms
// then match), and polling ends.
(function () {
  var parts = document.querySelectorAll("[data-poll]");
  if (!parts.length) return;
  var every = parseInt(parts[0].getAttribute("data-poll-every") || "5000", 10);
  var stopped = false;
  var timer = setInterval(function () {
    parts.forEach(function (part) {
      fetch(part.getAttribute("data-poll"), { credentials: "same-origin" })
        .then(function (r) {
          if (!r.ok || r.redirected) return null;
          if (r.headers.get("X-Poll-Stop") && !stopped) {
            stopped = true;
            clearInterval(timer);
            window.location.reload();
            return null;
          }
          return r.text();
        })
        .then(function (html) { if (html !== null && !stopped) part.innerHTML = html; })
        .catch(function () {});
    });
  }, every);
})();
