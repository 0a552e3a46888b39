// The console's only script of its own (pages allow no inline scripts): the organization
// switcher submits on change, and "Copy" buttons copy the text they point at. Everything works
// without it.
document.addEventListener("change", (event) => {
  if (event.target.matches("[data-submit-on-change]")) event.target.form.requestSubmit();
});
document.addEventListener("click", async (event) => {
  const button = event.target.closest("[data-copy]");
  if (!button) return;
  const text = document.getElementById(button.dataset.copy).textContent.trim();
  await navigator.clipboard.writeText(text);
  button.textContent = "Copied";
});
