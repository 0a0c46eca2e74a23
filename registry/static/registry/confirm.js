// A form with data-confirm asks that question before it submits. The handler lives here, not in an
// onsubmit attribute, because the Content-Security-Policy (registry/csp.py) runs no inline script.
document.querySelectorAll("form[data-confirm]").forEach((form) => {
  form.addEventListener("submit", (event) => {
    if (!window.confirm(form.dataset.confirm)) event.preventDefault();
  });
});
