// A job's page: its status panel polls while the job may change. When the job ends while the
// page is open, the page reloads once, so its buttons (no Cancel) and its endpoints (closed)
// say what they say for an ended job; a page loaded after the end never reloads.
(function () {
  const status = document.getElementById("job-status");
  if (!status || status.dataset.finished === "true") return;
  document.body.addEventListener("htmx:afterSwap", function () {
    const swapped = document.getElementById("job-status");
    if (swapped && swapped.dataset.finished === "true") location.reload();
  });
})();
