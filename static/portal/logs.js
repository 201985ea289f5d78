// Job logs: each <pre data-log-url> shows its pod's log, following it while the pod runs
// (the portal streams pods/log as plain text). Text goes in as text, never as HTML.
(function () {
  async function follow(pre) {
    const response = await fetch(pre.dataset.logUrl, { credentials: "same-origin" });
    if (!response.ok || !response.body) {
      pre.textContent = "The log could not be read (" + response.status + ").";
      return;
    }
    pre.textContent = "";
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.append(decoder.decode(value, { stream: true }));
      if (atBottom) pre.scrollTop = pre.scrollHeight;
    }
    pre.dataset.loaded = "true";
  }
  document.querySelectorAll("pre[data-log-url]").forEach(function (pre) {
    if (pre.textContent.trim() === "") follow(pre).catch(function (err) {
      pre.textContent = "The log could not be read: " + err;
    });
  });
})();
