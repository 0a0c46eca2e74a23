// Copy the text of the element named by a button's data-target, and say so on the button.
// navigator.clipboard exists only in secure contexts (https, localhost); a catalog served over
// plain http on a LAN falls back to selecting the text and execCommand("copy").

async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      // Permission refused or no user activation: try the old way below.
    }
  }
  const scratch = document.createElement("textarea");
  scratch.value = text;
  scratch.setAttribute("readonly", "");
  scratch.style.position = "fixed";
  scratch.style.opacity = "0";
  document.body.appendChild(scratch);
  scratch.select();
  let copied = false;
  try {
    copied = document.execCommand("copy");
  } catch {
    copied = false;
  }
  scratch.remove();
  return copied;
}

function selectContents(node) {
  const range = document.createRange();
  range.selectNodeContents(node);
  const selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
}

function announce(button, message, copied) {
  const label = button.dataset.label || button.textContent;
  button.dataset.label = label;
  button.textContent = message;
  button.classList.toggle("copied", copied);
  const status = button.parentElement.querySelector(".copy-status");
  if (status) status.textContent = message;
  clearTimeout(button.resetTimer);
  button.resetTimer = setTimeout(() => {
    button.textContent = label;
    button.classList.remove("copied");
    if (status) status.textContent = "";
  }, 2500);
}

document.querySelectorAll("button.copy").forEach((button) => {
  const status = document.createElement("span");
  status.className = "copy-status visually-hidden";
  status.setAttribute("role", "status");
  button.after(status);
  button.addEventListener("click", async () => {
    const source = document.getElementById(button.dataset.target);
    if (await copyText(source.textContent.trim())) {
      announce(button, "Copied", true);
    } else {
      // Neither way worked: leave the command selected so Ctrl+C (or ⌘C) copies it.
      selectContents(source);
      announce(button, "Selected: press Ctrl+C", false);
    }
  });
});
