// Job logs: each <pre data-log-url> shows its pod's log, following it while the pod runs
// (the portal streams pods/log as plain text). Text goes in as text, never as HTML.
(function () {
  async function follow(pre) {
    // Until the container's first line arrives, say why the box is empty.
    pre.textContent = "Reading the log…";
    const response = await fetch(pre.dataset.logUrl, { credentials: "same-origin" });
    if (!response.ok || !response.body) {
      pre.textContent = "The log could not be read (" + response.status + ").";
      return;
    }
    if (new URL(pre.dataset.logUrl, location.href).searchParams.has("follow")) {
      pre.textContent = "No output yet: lines appear here as the container writes them.";
    }
    let received = false;
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      const text = decoder.decode(value, { stream: true });
      if (!text) continue;
      if (!received) pre.textContent = "";
      received = true;
      const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.append(text);
      if (atBottom) pre.scrollTop = pre.scrollHeight;
    }
    if (!received) pre.textContent = "The container wrote no output.";
    pre.dataset.loaded = "true";
  }
  document.querySelectorAll("pre[data-log-url]").forEach(function (pre) {
    if (pre.textContent.trim() === "") follow(pre).catch(function (err) {
      pre.textContent = "The log could not be read: " + err;
    });
  });
})();
