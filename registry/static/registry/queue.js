// While runs are going, refresh the runs table in place every 5 seconds (no page reload, so focus
// and scroll stay put); a button pauses it. It stops by itself once nothing is going.
const region = document.getElementById("runs-live");
const toggle = document.getElementById("runs-live-toggle");
let paused = false;

async function refresh() {
  if (paused || !region || region.dataset.going !== "true") return;
  const response = await fetch(window.location.href, { headers: { Accept: "text/html" } });
  if (response.ok) {
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html").getElementById("runs-live");
    if (fresh) {
      region.innerHTML = fresh.innerHTML;
      region.dataset.going = fresh.dataset.going;
    }
  }
  if (region.dataset.going === "true") setTimeout(refresh, 5000);
  else if (toggle) toggle.hidden = true;
}

if (toggle) {
  toggle.addEventListener("click", () => {
    paused = !paused;
    toggle.textContent = paused ? "Resume live updates" : "Pause live updates";
    if (!paused) refresh();
  });
}
if (region && region.dataset.going === "true") setTimeout(refresh, 5000);
