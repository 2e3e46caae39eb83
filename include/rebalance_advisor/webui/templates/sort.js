document.querySelectorAll("th.sortable").forEach((th) => th.addEventListener("click", () => {
  const body = th.closest("table").tBodies[0], asc = th.dataset.dir !== "asc";
  th.dataset.dir = asc ? "asc" : "desc";
  const idx = [...th.parentNode.children].indexOf(th);
  const val = (r) => { const c = r.children[idx]; return c.dataset.v ?? c.textContent.trim(); };
  const rows = [...body.rows].sort((a, b) => {
    const x = val(a), y = val(b), nx = parseFloat(x), ny = parseFloat(y);
    if (x === "" || y === "") return (x === "") - (y === "");
    const d = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
    return asc ? d : -d;
  });
  rows.forEach((r) => body.appendChild(r));
}));
