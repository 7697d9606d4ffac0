// Refresh the approvals queue every 5 seconds with the server-rendered rows.
(function () {
  var body = document.querySelector("[data-poll]");
  if (!body) return;
  setInterval(function () {
    fetch(body.getAttribute("data-poll"), { credentials: "same-origin" })
      .then(function (r) { return r.ok && !r.redirected ? r.text() : null; })
      .then(function (html) { if (html !== null) body.innerHTML = html; })
      .catch(function () {});
  }, 5000);
})();
