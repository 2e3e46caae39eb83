const dlg = document.getElementById("confirm");
let pending = null;
document.querySelectorAll("button[data-action]").forEach((b) => b.addEventListener("click", () => {
  pending = b.dataset;
  document.getElementById("confirm-text").textContent =
    `${b.dataset.action === "approve" ? "Approve" : "Reject"} plan #${b.dataset.plan} for ${b.dataset.group}?`;
  document.getElementById("confirm-note").value = "";
  document.getElementById("confirm-reject-hint").hidden = b.dataset.action !== "reject";
  dlg.showModal();
}));
document.getElementById("confirm-no")?.addEventListener("click", () => dlg.close());
document.getElementById("confirm-yes")?.addEventListener("click", async () => {
  const note = document.getElementById("confirm-note").value.trim();
  dlg.close();
  const out = document.getElementById("decision-result");
  const r = await fetch(`${BASE}/api/plans/${pending.plan}/${pending.action}`, {method: "POST",
    credentials: "same-origin", headers: {"Content-Type": "application/json"}, body: JSON.stringify(note ? {note} : {})});
  const data = await r.json().catch(() => ({}));
  if (r.ok) { location.reload(); }
  else { out.className = "error"; out.textContent = `${r.status}: ${data.detail ?? r.statusText}`; }
});
