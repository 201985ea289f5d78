// Job logs: each <pre data-log-url> shows its pod's last lines, and reads on from where the
// last read ended (the X-Log-Cursor header): at once while the log holds more than a read
// (X-Log-More), and, with data-follow, every few seconds while the pod may write more
// (X-Log-Open), more slowly while nothing comes and not while the tab is hidden. A pod not
// started yet (X-Log-Started: 0) is said so in place until it starts.
// Every read is a short request: no connection is held open. Text goes in as text, never HTML.
(function () {
  const FIRST = 2000, SLOWEST = 15000;
  // The page keeps the newest few MB of a log; all of it is in the download.
  const KEEP = 4000000, EARLIER = "[earlier lines: download the log for all of it]\n";

  function sleep(ms) {
    return new Promise(function (done) { setTimeout(done, ms); });
  }

  function visible() {
    if (document.visibilityState !== "hidden") return Promise.resolve();
    return new Promise(function (done) {
      document.addEventListener("visibilitychange", function seen() {
        if (document.visibilityState !== "hidden") {
          document.removeEventListener("visibilitychange", seen);
          done();
        }
      });
    });
  }

  function append(pre, text) {
    const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.append(text);
    if (pre.textContent.length > KEEP) {
      const kept = pre.textContent.slice(-KEEP / 2);
      pre.textContent = EARLIER + kept.slice(kept.indexOf("\n") + 1);
    }
    if (atBottom) pre.scrollTop = pre.scrollHeight;
  }

  async function show(pre) {
    const base = new URL(pre.dataset.logUrl, location.href);
    const follow = "follow" in pre.dataset;
    let cursor = null, wait = FIRST, placeholder = true;
    pre.textContent = "Reading the log…";
    function say(text) {  // in place of the placeholder, or after the lines shown
      if (placeholder) { pre.textContent = ""; placeholder = false; }
      append(pre, text);
    }
    for (;;) {
      const url = new URL(base);
      if (cursor) url.searchParams.set("after", cursor);
      else url.searchParams.set("tail", "1000");
      let response = null;
      try {
        response = await fetch(url, { credentials: "same-origin" });
      } catch (err) {
        response = null;  // offline a moment: tried again below
      }
      if (response && response.ok && response.headers.get("X-Log-Started") === "0") {
        // Not started yet: say so in place, and look again until it starts (or ends).
        pre.textContent = (await response.text()).trim();
        placeholder = true;
        if (!follow || response.headers.get("X-Log-Open") !== "1") break;
        wait = Math.min(SLOWEST, wait * 1.5);
      } else if (response && response.ok) {
        const text = await response.text();
        if (text) say(text);
        else if (placeholder) {
          pre.textContent = follow
            ? "No output yet: lines appear here as the container writes them."
            : "The container wrote no output.";
        }
        cursor = response.headers.get("X-Log-Cursor") || cursor;
        if (response.headers.get("X-Log-More") === "1") continue;  // more there already
        if (!follow || response.headers.get("X-Log-Open") !== "1") break;
        wait = text ? FIRST : Math.min(SLOWEST, wait * 1.5);
      } else if (response && response.status < 500) {
        const why = (await response.text()).trim();
        say("\n[the log could not be read (" + response.status + "): " + why + "]\n");
        break;
      } else {  // the portal or the cluster did not answer: try again, more slowly
        wait = Math.min(SLOWEST, wait * 2);
      }
      await sleep(wait);
      await visible();
    }
    pre.dataset.loaded = "true";
  }

  document.querySelectorAll("pre[data-log-url]").forEach(function (pre) {
    show(pre).catch(function (err) {
      pre.textContent = "The log could not be read: " + err;
    });
  });
})();
