// Copy the text of the element named by a button's data-target.
document.querySelectorAll("button.copy").forEach((button) => {
  button.addEventListener("click", async () => {
    const text = document.getElementById(button.dataset.target).innerText;
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  });
});
