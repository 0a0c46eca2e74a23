// Refresh a running certification's status from the API every two seconds until it ends.
const panel = document.getElementById("run-status");
const FINAL = ["finished", "failed_user", "failed_infra", "cancelled"];

async function refresh() {
  const response = await fetch(panel.dataset.api, { headers: { Accept: "application/json" } });
  if (!response.ok) return;
  const run = await response.json();
  panel.querySelectorAll("[data-field]").forEach((node) => {
    const value = run[node.dataset.field];
    node.textContent = value === null || value === "" ? "–" : value;
  });
  panel.querySelector("progress").value = run.progress;
  panel.querySelector(".error").hidden = !run.error_code;
  if (FINAL.includes(run.state)) {
    window.location.reload();  // the final page shows results and the error's hint
  } else {
    setTimeout(refresh, 2000);
  }
}

if (panel && panel.dataset.final === "false") setTimeout(refresh, 2000);
